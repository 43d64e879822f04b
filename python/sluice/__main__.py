"""python3 -m sluice --version: the package's version and where it was loaded from."""

import argparse
import sys

import sluice


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m sluice", description=__doc__)
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    args = parser.parse_args(argv)
    if args.version:
        print(f"sluice {sluice.__version__} ({sluice.__file__})")
        return 0
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
