"""The dir backend over NFS: dir_site_test.py again, with its shared folder on an NFS mount of
this machine (kernel nfsd exporting a temp dir to 127.0.0.1, mounted back over loopback).

Needs root, a kernel with the NFS server and client (nfsd and nfs in /proc/filesystems, or as
modules modprobe can load) and nfs-kernel-server's tools (scripts/lib/common.sh installs
them). Without any of these it exits 77 (ctest: skipped) and says which one is missing; a
sandbox whose kernel has neither, as the one the numbers in docs/LOCKING.md were taken on, is
such a case.

    python3 dir_nfs_test.py --demo BIN --source DIR --locks BIN [--vers 3|4.2]
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SKIP = 77


def skip(why):
    print("SKIPPED: dir over NFS not run: " + why)
    sys.exit(SKIP)


def filesystems():
    try:
        return {line.split()[-1] for line in open("/proc/filesystems") if line.strip()}
    except OSError:
        return set()


def run(argv, **kw):
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=60, **kw)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--demo", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--locks", required=True)
    ap.add_argument("--vers", default="4.2")
    args = ap.parse_args()

    if os.geteuid() != 0:
        skip("exporting and mounting NFS needs root")
    if shutil.which("modprobe"):
        run(["modprobe", "nfsd"])
        run(["modprobe", "nfs"])
    fs = filesystems()
    missing = [f for f in ("nfsd", "nfs") if f not in fs]
    if missing:
        skip("this kernel has no %s (not in /proc/filesystems, and no module could be loaded)"
             % " and no ".join(missing))
    tools = [t for t in ("exportfs", "rpc.nfsd", "rpc.mountd", "mount.nfs") if not shutil.which(t)]
    if tools:
        skip("missing %s (apt-get install nfs-kernel-server)" % ", ".join(tools))

    work = tempfile.mkdtemp(prefix="kagi-dir-nfs-")
    export, mnt = os.path.join(work, "export"), os.path.join(work, "mnt")
    os.makedirs(export)
    os.makedirs(mnt)
    os.chmod(work, 0o755)
    started = []
    mounted = False
    try:
        if not os.path.ismount("/proc/fs/nfsd"):
            r = run(["mount", "-t", "nfsd", "nfsd", "/proc/fs/nfsd"])
            if r.returncode:
                skip("cannot mount /proc/fs/nfsd: " + r.stdout.strip())
        if shutil.which("rpcbind"):
            run(["rpcbind"])
        r = run(["exportfs", "-o", "rw,sync,no_root_squash,insecure,no_subtree_check,fsid=717",
                 "127.0.0.1:" + export])
        if r.returncode:
            skip("exportfs failed: " + r.stdout.strip())
        r = run(["rpc.nfsd", "4"])
        if r.returncode:
            skip("rpc.nfsd failed: " + r.stdout.strip())
        started.append("nfsd")
        mountd = subprocess.Popen(["rpc.mountd", "-F"], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        started.append(mountd)
        r = run(["mount", "-t", "nfs", "-o", "vers=%s" % args.vers,
                 "127.0.0.1:" + export, mnt])
        if r.returncode:
            skip("cannot mount the loopback export (vers=%s): %s" % (args.vers, r.stdout.strip()))
        mounted = True
        print("  NFS vers=%s: %s exported and mounted on %s" % (args.vers, export, mnt))
        code = subprocess.call([sys.executable, os.path.join(HERE, "dir_site_test.py"),
                                "--demo", args.demo, "--source", args.source, "--locks",
                                args.locks, "--root", mnt])
        print("dir over NFS (vers=%s): dir_site_test exit %d" % (args.vers, code))
        return code
    finally:
        if mounted:
            run(["umount", "-f", "-l", mnt])
        run(["exportfs", "-u", "127.0.0.1:" + export])
        for s in started:
            if s == "nfsd":
                run(["rpc.nfsd", "0"])
            else:
                s.terminate()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
