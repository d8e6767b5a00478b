#!/bin/sh
# gpuforge test stand-in for /sbin/mount.@FSTYPE@ (package @PACKAGE@): there is no @FSTYPE@ kernel module here.
# mount(8) calls it as it calls the real helper (mount.@FSTYPE@ SOURCE DIR [-sfnv] [-o OPTIONS]). It refuses
# what the real client refuses (a source not of the client's form; for BeeGFS a missing cfgFile or an empty
# sysMgmtdHost; for WEKA a stopped weka-agent; for EFS a mount without tls; for Lustre it brings LNet up as loading lustre.ko does, and needs the MGS NIDs' network among LNet's) and
# otherwise mounts a tmpfs whose source is SOURCE on DIR: the mount point is live, and /proc/mounts names
# the file system's source (with fstype tmpfs). tests/standins/packages.py fills in @FSTYPE@ and @PACKAGE@.
# A file system several machines share (the Slurm controllers' state: tests/slurm/test_slurm_failover.py) is
# one host directory the test bound into each machine at $exports/<server or id>/<export>: the helper binds
# that on DIR instead, so every machine that mounts the source sees the same files.
set -eu
fstype=@FSTYPE@
[ $# -ge 2 ] || { echo "usage: mount.$fstype SOURCE DIR [-o OPTIONS]" >&2; exit 1; }
source=$1
dir=$2
shift 2
opts=
while [ $# -gt 0 ]; do
  case $1 in
    -o) opts=$2; shift 2 ;;
    *) shift ;;
  esac
done
fail() { echo "mount.$fstype: $*" >&2; exit 32; }
option() { printf '%s\n' "$opts" | tr ',' '\n' | sed -n "s/^$1=//p" | head -n 1; }

case $fstype in
  lustre)
    # MGS NIDs (failover ones joined with ':'), then :/fsname (mount.lustre(8)).
    printf '%s\n' "$source" | grep -Eq '^[^:/@]+@[a-z][a-z0-9]*(:[^:/@]+@[a-z][a-z0-9]*)*:/[A-Za-z0-9_]+$' \
      || fail "$source: not <mgsnid>[:<mgsnid>]:/<fsname>"
    # Loading lustre.ko brings LNet up with its default network (tcp on the first interface) when nothing
    # configured it before: the mount then works, over tcp. Record the LNet networks the mount found.
    /sbin/modprobe lustre
    if ! lnetctl net show >/dev/null 2>&1; then
      lnetctl lnet configure
      lnetctl net add --net tcp --if "$(awk '$2 == "00000000" { print $1; exit }' /proc/net/route)"
    fi
    # The MGS NIDs' network must be one of the client's LNet networks (no LNet routers here): a NID on o2ib
    # with no o2ib network configured has no route, and the real mount fails (ENETUNREACH).
    nets=$(lnetctl net show | sed -n 's/.*- net type: //p' | paste -sd, -)
    nidnet=$(printf '%s\n' "$source" | sed 's/:\/.*//; s/:.*//; s/.*@//')
    case ",$nets," in
      *",$nidnet,"*) ;;
      *) fail "$source: no route to the MGS NIDs' network $nidnet (LNet networks: $nets)" ;;
    esac
    mkdir -p /run/lustre-standin
    echo "$dir $nets" >> /run/lustre-standin/mounts
    ;;
  beegfs)
    [ "$source" = beegfs_nodev ] || fail "$source: the source is beegfs_nodev"
    cfg=$(option cfgFile)
    [ -n "$cfg" ] && [ -f "$cfg" ] || fail "no client configuration (cfgFile=$cfg)"
    grep -Eq '^sysMgmtdHost[[:space:]]*=[[:space:]]*[^[:space:]]+' "$cfg" || fail "sysMgmtdHost is empty in $cfg"
    ;;
  wekafs)
    # <backend>[,<backend>...]/<filesystem>; the agent serves the client.
    printf '%s\n' "$source" | grep -Eq '^[^/,]+(,[^/,]+)*/[A-Za-z0-9_-]+$' || fail "$source: not <backends>/<fs>"
    systemctl is-active --quiet weka-agent.service || fail "the weka-agent service is not running"
    ;;
  nfs)
    # mount.nfs(8): <server>:/<export>.
    printf '%s\n' "$source" | grep -Eq '^[^:/]+:/' || fail "$source: not <server>:/<export>"
    ;;
  efs)
    # The EFS mount helper (amazon-efs-utils): <file-system-id>:/<path>. gpuforge's file systems have a policy
    # that denies every request not over TLS (aws:SecureTransport false), so the server refuses a mount without
    # the helper's tls option, as the real one ends: "mount.nfs4: access denied by server". Record the options.
    printf '%s\n' "$source" | grep -Eq '^fs-[0-9a-f]{8,40}:/' || fail "$source: not <file-system-id>:/<path>"
    printf '%s\n' "$opts" | tr ',' '\n' | grep -qx tls \
      || fail "mount.nfs4: access denied by server while mounting $source (the file system policy requires TLS: -o tls)"
    record=${EFS_STANDIN_RUN:-/run/efs-standin}
    mkdir -p "$record"
    echo "$dir $opts" >> "$record/mounts"
    ;;
esac
exports=${STANDIN_EXPORTS:-/var/lib/gpuforge-standin/exports}
shared="$exports/$(printf '%s\n' "$source" | sed 's|:/*|/|')"
[ -d "$shared" ] && exec mount -i --bind "$shared" "$dir"
exec mount -i -t tmpfs -o size=16m,mode=0755 "$source" "$dir"
