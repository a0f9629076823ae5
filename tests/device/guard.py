"""Read-only guard in front of the real nvidia-smi and dcgmi on a lent GPU machine (tests/device/check.sh).

Usage (from a wrapper on PATH): guard.py TOOL REAL_PATH ARG...

Every call is logged to /tmp/cf-guard.log. A call runs only when every argument is on this file's allow-list of
READ-ONLY forms; anything else (-pm, -pl, -lgc, -rgc, -ac, -rac, -lmc, -rmc, -r, -mig, -e, -c, health -s, a diag
above level 1, ...) is refused with exit status 99 and never reaches the tool. The machine's clocks, power limit,
persistence mode and MIG mode are not ours to change.
"""
import os
import re
import sys

LOG = "/tmp/cf-guard.log"
VALUE = re.compile(r"^(?:[0-9]+(?:,[0-9]+)*|GPU-[0-9a-fA-F-]+|[0-9A-Fa-f:.]+|[A-Z_]+(?:,[A-Z_]+)*)$")
SMI_FLAGS = {"-q", "--query", "-x", "--xml-format", "--version", "-L", "--list-gpus", "--help-query-gpu",
             "--help-query-compute-apps", "-h", "--help"}
SMI_VALUED = {"-i", "--id", "-d", "--display"}
SMI_PREFIXES = ("--query-gpu=", "--query-compute-apps=", "--format=", "--id=", "--display=")


def smi_allowed(args):
    if not args:
        return True
    if args[0] == "topo":
        return args[1:] == ["-m"]
    if args[0] == "nvlink":
        rest = args[1:]
        i = 0
        while i < len(rest):
            if rest[i] in ("-s", "--status", "-e", "--errorcounters"):
                i += 1
            elif rest[i] in ("-i", "--id") and i + 1 < len(rest) and VALUE.match(rest[i + 1]):
                i += 2
            else:
                return False
        return True
    i = 0
    while i < len(args):
        a = args[i]
        if a in SMI_FLAGS or a.startswith(SMI_PREFIXES):
            i += 1
        elif a in SMI_VALUED and i + 1 < len(args) and VALUE.match(args[i + 1]):
            i += 2
        else:
            return False
    return True


def dcgmi_allowed(args):
    if args in (["-v"], ["--version"], ["discovery", "-l"]):
        return True
    if args[:2] == ["health", "-c"]:
        return all(a in ("-j", "--json") for a in args[2:])
    if args[:1] == ["diag"]:
        rest, level, i = args[1:], None, 0
        while i < len(rest):
            a = rest[i]
            if a in ("-r", "--run") and i + 1 < len(rest):
                level, i = rest[i + 1], i + 2
            elif a in ("-j", "--json"):
                i += 1
            elif a in ("--timeout", "-i", "--gpuList") and i + 1 < len(rest) and VALUE.match(rest[i + 1]):
                i += 2
            else:
                return False
        return level == "1"
    return False


def main():
    tool, real, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    ok = smi_allowed(args) if tool == "nvidia-smi" else dcgmi_allowed(args)
    with open(LOG, "a") as log:
        log.write("%s %s %s\n" % ("RUN" if ok else "REFUSED", tool, " ".join(args)))
    if not ok:
        sys.stderr.write("cf-guard: refused %s %s (not a read-only form)\n" % (tool, " ".join(args)))
        return 99
    os.execv(real, [real] + args)


if __name__ == "__main__":
    sys.exit(main())
