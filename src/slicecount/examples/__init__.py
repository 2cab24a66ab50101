"""Example apps instrumented with slicecount, and a traffic generator (the demo and the stack)."""
