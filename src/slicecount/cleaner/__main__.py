"""``python -m slicecount.cleaner [options]`` is ``slicecount cleaner [options]``."""

import sys

from slicecount.console import main

if __name__ == "__main__":
    main(["cleaner", *sys.argv[1:]], prog_name="python -m slicecount")
