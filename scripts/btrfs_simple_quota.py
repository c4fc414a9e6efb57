"""Turns on btrfs simple quotas for the file system holding a folder (Linux 6.7 and later).

Debian's btrfs-progs predates the `--simple` flag, so this asks the kernel directly with the
BTRFS_IOC_QUOTA_CTL ioctl. Exits 0 when simple quotas are on (already, or now), 1 otherwise.
"""
import fcntl
import os
import struct
import sys

BTRFS_IOC_QUOTA_CTL = 0xC0109428  # _IOWR(0x94, 40, struct btrfs_ioctl_quota_ctl_args), 16 bytes
ENABLE_SIMPLE_QUOTA = 4


def main(folder: str) -> int:
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.ioctl(fd, BTRFS_IOC_QUOTA_CTL, struct.pack("QQ", ENABLE_SIMPLE_QUOTA, 0))
    except OSError as exc:
        print(f"btrfs simple quotas unavailable on {folder}: {exc}", file=sys.stderr)
        return 1
    finally:
        os.close(fd)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
