#!/bin/sh
# gpuforge test stand-in for /opt/amazon/efa/bin/fi_info (libfabric-aws-bin, from the EFA installer): there is
# no libfabric and no EFA device here. For `fi_info -p efa -t FI_EP_RDM` it prints what libfabric's efa
# provider lists, one RDM endpoint per EFA device (an RDMA device whose PCI driver is efa) found in sysfs or
# in the stand-in sysfs @SYSFS@, in fi_info's output form (fields as a real run prints them). Without any it
# fails as fi_info does when no provider matches (fi_getinfo: -FI_ENODATA). tests/standins/packages.py fills
# in @SYSFS@.
set -eu
found=0
for root in /sys @SYSFS@; do
  for device in "$root"/class/infiniband/*; do
    [ -e "$device/device/driver" ] || continue
    [ "$(basename "$(readlink -f "$device/device/driver")")" = efa ] || continue
    printf 'provider: efa\n    fabric: efa\n    domain: %s-rdm\n    type: FI_EP_RDM\n    protocol: FI_PROTO_EFA\n' \
      "$(basename "$device")"
    found=$((found + 1))
  done
done
if [ "$found" -eq 0 ]; then
  echo "fi_getinfo: -61 (No data available)" >&2
  exit 61
fi
