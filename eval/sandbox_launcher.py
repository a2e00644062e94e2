"""The sandbox's launcher, run as `python -I -S sandbox_launcher.py CONFIG_JSON` as the leader of a new process group (setsid).

Not imported: `eval.sandbox` runs this file as a script (standard library only). It joins the run's
cgroups, unshares the namespaces, forks the namespace's PID 1 (which builds the private mounts and
reports what worked on the status fd), which forks the user process (unprivileged uid, rlimits,
no-new-privs, seccomp filter, execve).
"""

import ctypes
import json
import os
import resource
import struct
import sys

cfg = json.loads(sys.argv[1])
status_fd = cfg["status_fd"]
libc = ctypes.CDLL(None, use_errno=True)
NEWNS, NEWIPC, NEWUSER, NEWPID, NEWNET = 0x00020000, 0x08000000, 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
info = {
    "uid": os.getuid(),
    "netns": False,
    "pidns": False,
    "mountns": False,
    "ipcns": False,
    "userns": False,
    "private_tmp": False,
    "private_dirs": [],
    "readonly_root": False,
    "proc": False,
    "seccomp": False,
    "cgroup_joined": False,
    "dropped_privileges": False,
    "errors": [],
}


def err(what):
    e = ctypes.get_errno()
    info["errors"].append(what + ": " + os.strerror(e))


def unshare(flags):
    fn = getattr(libc, "unshare", None)  # Linux only
    return fn is not None and fn(flags) == 0


def prctl(option, value):
    fn = getattr(libc, "prctl", None)  # Linux only
    return fn is not None and fn(option, value, 0, 0, 0) == 0


def mount(src, tgt, fstype, flags, data):
    def enc(s):
        return None if s is None else s.encode()

    return libc.mount(enc(src), enc(tgt), enc(fstype), ctypes.c_ulong(flags), enc(data)) == 0


def join_cgroups():
    """Move this process (and so every descendant) into the run's own cgroups."""
    joined = bool(cfg["cgroup_procs"])
    for procs in cfg["cgroup_procs"]:
        try:
            with open(procs, "w") as f:
                f.write(str(os.getpid()))
        except OSError as e:
            joined = False
            info["errors"].append("join cgroup " + procs + ": " + str(e))
    info["cgroup_joined"] = joined


join_cgroups()
root = os.geteuid() == 0
net = NEWNET if not cfg["network"] else 0
if root:
    if unshare(NEWNS | NEWPID | NEWIPC | net):
        info.update(mountns=True, pidns=True, ipcns=True, netns=bool(net))
    else:
        err("unshare")
else:
    uid, gid = os.getuid(), os.getgid()
    if unshare(NEWUSER | NEWPID | NEWNS | NEWIPC | net):
        info.update(userns=True, pidns=True, mountns=True, ipcns=True, netns=bool(net))
        try:
            for name, text in (
                ("setgroups", "deny"),
                ("uid_map", f"{uid} {uid} 1"),
                ("gid_map", f"{gid} {gid} 1"),
            ):
                with open("/proc/self/" + name, "w") as f:
                    f.write(text)
        except OSError as e:
            info["errors"].append("id map: " + str(e))
    elif unshare(NEWUSER | NEWPID | net):  # older kernels: no mount/IPC namespace in a user namespace
        info.update(userns=True, pidns=True, netns=bool(net))
    else:
        err("unshare(user)")


def _mount_points():
    """Mount points of this namespace, parents before children (mountinfo order)."""
    points = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].encode().decode("unicode_escape")  # "\040" is a space
            if point not in points:
                points.append(point)
    return points


def make_readonly():
    """Remount every inherited mount read-only (in this namespace only): no host file can change."""
    ok = True
    for point in _mount_points():
        if point == "/proc" or point.startswith("/proc/"):
            continue  # replaced by a fresh procfs below
        try:
            st = os.statvfs(point)
        except OSError:
            continue
        keep = st.f_flag & (MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME | MS_NODIRATIME)
        if st.f_flag & 4096:  # ST_RELATIME
            keep |= MS_RELATIME
        if not mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | keep, None):
            ok = False
            err("read-only " + point)
    info["readonly_root"] = ok


def setup_mounts():
    # Everything created below lives in this mount namespace only and vanishes with it.
    if not mount(None, "/", None, MS_REC | MS_PRIVATE, None):
        return err("make / private")
    with open(cfg["script"], "rb") as f:  # re-created inside the private /tmp below
        script = f.read()
    make_readonly()
    size = "size=" + str(cfg["tmpfs_mb"]) + "m,mode=1777"
    seen = set()
    for d in cfg["private_dirs"]:
        real = os.path.realpath(d)
        if real in seen:
            continue
        seen.add(real)
        try:  # a private parent (/run) hides its children (/run/lock): re-create them empty
            os.makedirs(real, mode=0o755, exist_ok=True)
        except OSError:
            err("mkdir " + real)
            continue
        if mount("tmpfs", real, "tmpfs", MS_NOSUID | MS_NODEV, size):
            info["private_dirs"].append(real)
        else:
            err("tmpfs " + real)
    if "/tmp" not in info["private_dirs"]:
        return
    workdir = os.path.dirname(cfg["script"])
    os.makedirs(workdir, mode=0o700, exist_ok=True)
    with open(cfg["script"], "wb") as f:
        f.write(script)
    if cfg["drop"]:
        os.chown(workdir, cfg["uid"], cfg["uid"])
        os.chown(cfg["script"], cfg["uid"], cfg["uid"])
    os.chdir(workdir)
    info["private_tmp"] = True
    if mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None):
        info["proc"] = True
    else:
        err("mount proc")
    hidden = cfg["hide_dir"]
    if hidden:  # bind the interpreter prefix aside, hide the untraversable dir, bind it back
        stage = "/tmp/.lw-stage"
        os.mkdir(stage, 0o755)
        if not mount(cfg["prefix"], stage, None, MS_BIND | MS_REC, None):
            return err("bind prefix")
        if not mount("tmpfs", hidden, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755"):
            return err("hide " + hidden)
        os.makedirs(cfg["prefix"], mode=0o755, exist_ok=True)
        if not mount(stage, cfg["prefix"], None, MS_BIND | MS_REC, None):
            return err("rebind prefix")
        mount(None, cfg["prefix"], None, MS_REMOUNT | MS_BIND | MS_RDONLY, None)
        libc.umount2(stage.encode(), 2)  # MNT_DETACH
        os.rmdir(stage)
    info["interpreter_reachable"] = True


# seccomp: refuse socket(AF_UNIX) (no host Unix socket is reachable, whatever its path or
# permissions), io_uring (which could open sockets without the socket syscall) and any syscall of
# another ABI (x32, i386), which would bypass the numbers checked here.
_SECCOMP_ARCH = {"x86_64": (0xC000003E, 41), "aarch64": (0xC00000B7, 198)}


def install_seccomp():
    arch = _SECCOMP_ARCH.get(os.uname().machine)
    if arch is None:
        info["errors"].append("seccomp: no filter for " + os.uname().machine)
        return False
    audit_arch, nr_socket = arch
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    enosys, eacces, allow = 0x00050000 | 38, 0x00050000 | 13, 0x7FFF0000
    prog = [
        (ld, 0, 0, 4),  # arch
        (jeq, 1, 0, audit_arch),
        (ret, 0, 0, enosys),
        (ld, 0, 0, 0),  # syscall number
        (jge, 0, 1, 0x40000000),  # x32 ABI
        (ret, 0, 0, enosys),
        (jeq, 0, 1, 425),  # io_uring_setup
        (ret, 0, 0, enosys),
        (jeq, 0, 3, nr_socket),
        (ld, 0, 0, 16),  # args[0]: the address family
        (jeq, 0, 1, 1),  # AF_UNIX
        (ret, 0, 0, eacces),
        (ret, 0, 0, allow),
    ]
    buf = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *ins) for ins in prog))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(prog), ctypes.addressof(buf))
    # prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog)
    return libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) == 0


def run_user():
    os.close(status_fd)
    if info["dropped_privileges"]:
        os.setgroups([])
        os.setgid(cfg["uid"])
        os.setuid(cfg["uid"])
    prctl(38, 1)  # PR_SET_NO_NEW_PRIVS
    for name, value in cfg["limits"].items():
        lim = getattr(resource, name)
        resource.setrlimit(lim, (value, value))
    if cfg["seccomp"] and not install_seccomp():
        raise OSError("seccomp filter could not be installed: " + os.strerror(ctypes.get_errno()))
    os.execve(cfg["python"], [cfg["python"], "-I", "-S", cfg["script"], *cfg["argv"]], cfg["env"])


pid = os.fork()
if pid:  # launcher: outside the PID namespace, just relay the exit status
    _, st = os.waitpid(pid, 0)
    os._exit(os.waitstatus_to_exitcode(st) if os.WIFEXITED(st) else 128 + os.WTERMSIG(st))

# PID 1 of the new namespace (or a plain child when namespaces failed)
prctl(1, 9)  # PR_SET_PDEATHSIG=SIGKILL: die with the launcher
info["interpreter_reachable"] = not cfg["hide_dir"]
if info["mountns"]:
    setup_mounts()
info["dropped_privileges"] = root and info["interpreter_reachable"] and cfg["drop"]
if root and not info["dropped_privileges"]:
    info["errors"].append("running as root: could not make the interpreter reachable for the sandbox uid")
if cfg["seccomp"]:
    info["seccomp"] = os.uname().machine in _SECCOMP_ARCH
os.write(status_fd, (json.dumps(info) + "\n").encode())
child = os.fork()
if child == 0:
    try:
        run_user()
    except BaseException as e:
        os.write(2, ("sandbox setup failed: " + repr(e) + "\n").encode())
        os._exit(125)
_, st = os.waitpid(child, 0)
sig = os.WTERMSIG(st) if os.WIFSIGNALED(st) else 0
os.write(status_fd, (json.dumps({"signal": sig}) + "\n").encode())
os._exit(os.waitstatus_to_exitcode(st) if not sig else 128 + sig)
