"""``python -m slicecount.cli [options]`` is ``slicecount [options]``."""

from slicecount.cli.commands import main

if __name__ == "__main__":
    main()
