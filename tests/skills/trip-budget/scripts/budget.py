"""Prints the total of a stay: NIGHTS times each nightly PRICE. With TRIP_BUDGET_RAN set in
the file beside this one (tests), it also notes each run there."""

import sys
from pathlib import Path

nights, *prices = sys.argv[1:]
total = int(nights) * sum(float(p) for p in prices)
ran = Path(__file__).with_name("ran.txt")
if ran.parent.joinpath("count-runs").exists():
    with open(ran, "a") as fh:
        fh.write(f"{total}\n")
print(f"total: {total:g} euros")
