#!/usr/bin/env bash
# Runs PROGRAM ARGS... with SLUICE_SYSFS pointing at a sysfs tree in WORK_DIR where the fake
# libcuda's first GPU (PCI 0000:17:00.0) has a 16 MiB BAR0 and a 256 MiB BAR1, as an H100's
# function shows them, so libsluice_cufile's BAR size can be read on a machine without a GPU.
# usage: run-with-sysfs.sh WORK_DIR PROGRAM [ARGS...]
set -euo pipefail
work=${1:?usage: run-with-sysfs.sh WORK_DIR PROGRAM [ARGS...]}
shift
[ $# -gt 0 ] || { echo "usage: run-with-sysfs.sh WORK_DIR PROGRAM [ARGS...]" >&2; exit 2; }
rm -rf "$work" && mkdir -p "$work/sys/bus/pci/devices/0000:17:00.0"
printf '%s\n' '0x00000000fa000000 0x00000000faffffff 0x0000000000040200' \
              '0x0000038000000000 0x000003800fffffff 0x000000000014220c' \
              '0x0000000000000000 0x0000000000000000 0x0000000000000000' \
  > "$work/sys/bus/pci/devices/0000:17:00.0/resource"
echo 0 > "$work/sys/bus/pci/devices/0000:17:00.0/numa_node"
SLUICE_SYSFS="$work/sys" exec "$@"
