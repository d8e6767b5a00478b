# enroot configuration: rendered by gpuforge (templates/containers/enroot.conf.j2).
# Per-user directories: enroot expands $(id -u) for the user who runs it.
ENROOT_RUNTIME_PATH /run/enroot/user-$(id -u)
ENROOT_CACHE_PATH /var/lib/enroot/cache/user-$(id -u)
ENROOT_DATA_PATH /var/lib/enroot/data/user-$(id -u)
ENROOT_SQUASH_OPTIONS -noI -noD -noF -noX -no-duplicates
ENROOT_MOUNT_HOME yes
ENROOT_RESTRICT_DEV yes
ENROOT_ROOTFS_WRITABLE yes
