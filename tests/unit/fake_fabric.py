# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fake ib_write_bw and srun for the tests of the ib_write_bw module and of the validation's fabric phase, and the
node program installed as the slurm_compute role installs it."""

import os

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PROGRAM = os.path.join(ROOT, "roles", "slurm_compute", "files", "clusterforge-ib-write-bw-round")
ROUNDS_SOURCE = os.path.join(ROOT, "plugins", "module_utils", "fabric_rounds.py")

# Fake ib_write_bw: the server side prints the banner and its header and exits 0 (after FAKE_IB_SERVER_SECONDS);
# the client side prints the result table with FAKE_IB_GBPS_<hca> Gb/s (default 388.4), or refuses the first
# FAKE_IB_REFUSE connections per port, or exits 1 when FAKE_IB_FAIL names the HCA; FAKE_IB_NOISE=n prints n
# characters of random hex first.
FAKE_IB_WRITE_BW = r'''
import json, os, sys, time
args = sys.argv[1:]
opts, host, i = {}, None, 0
while i < len(args):
    a = args[i]
    if a in ("-d", "-p", "-s", "-n", "-x"):
        opts[a] = args[i + 1]
        i += 2
        continue
    if not a.startswith("-"):
        host = a
    i += 1
log = os.environ["FAKE_IB_LOG"]
with open(log, "a") as f:
    f.write(json.dumps({"argv": args, "t": time.time(), "side": "client" if host else "server"}) + "\n")
hca, port = opts.get("-d"), opts.get("-p", "18515")
line = " " + "-" * 87
def done():
    with open(log + ".end", "a") as f:
        f.write("%r\n" % time.time())
if host is None:
    time.sleep(float(os.environ.get("FAKE_IB_SERVER_SECONDS", "0")))
    done()
    print("\n************************************\n* Waiting for client to connect... *\n"
          "************************************")
    print(line)
    print("                     RDMA_Write BW Test")
    print(" Dual-port       : OFF          Device         : %s" % hca)
    sys.exit(0)
state = os.path.join(os.path.dirname(log), "refused-%s" % port)
refused = int(open(state).read()) if os.path.exists(state) else 0
if refused < int(os.environ.get("FAKE_IB_REFUSE", "0")):
    open(state, "w").write(str(refused + 1))
    sys.stderr.write("Couldn't connect to %s:%s\nUnable to open file descriptor for socket connection Unable to "
                     "init the socket connection\n" % (host, port))
    sys.exit(1)
if hca in os.environ.get("FAKE_IB_FAIL", "").split(","):
    sys.stderr.write(" Couldn't get context for the device\n")
    sys.exit(1)
time.sleep(float(os.environ.get("FAKE_IB_CLIENT_SECONDS", "0")))
done()
gbps = float(os.environ.get("FAKE_IB_GBPS_%s" % hca, "388.4"))
if os.environ.get("FAKE_IB_NOISE"):  # lines of text that does not compress, before the table
    print(os.urandom(int(os.environ["FAKE_IB_NOISE"]) // 2).hex())
print(line)
print("                     RDMA_Write BW Test")
print(" Dual-port       : OFF          Device         : %s" % hca)
print(" Number of qps   : 1            Transport type : IB")
print(" Connection type : RC           Using SRQ      : OFF")
print(" TX depth        : 128")
print(" CQ Moderation   : 1")
print(" Mtu             : 4096[B]")
print(" Link type       : IB")
print(" Max inline data : 0[B]")
print(" rdma_cm QPs     : OFF")
print(" Data ex. method : Ethernet")
print(line)
print(" local address: LID 0x11 QPN 0x0123 PSN 0x4a3b2c RKey 0x1fff00 VAddr 0x007f2a4c000000")
print(" remote address: LID 0x12 QPN 0x0456 PSN 0x5b4c3d RKey 0x2fff00 VAddr 0x007f3b5d000000")
print(line)
print(" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]")
print(" %-7s    %-7s          %-7.2f            %-7.2f            %-7.6f" % (opts.get("-s", "65536"),
      opts.get("-n", "5000"), gbps + 0.3, gbps, gbps * 1e9 / 8 / int(opts.get("-s", "65536")) / 1e6))
print(line)
'''

# A fake srun that does what Slurm's would for `srun -N n -w a,b,... --ntasks-per-node=1 PROGRAM ARGS`: it starts
# PROGRAM on every node of -w at once, each with SLURMD_NODENAME set, and prints their stdout in 1 KiB messages
# taken from each task in turn (a line longer than that is cut and mixed with other tasks' output, as with srun).
# FAKE_SRUN_BUSY makes it fail as srun does when --immediate runs out; FAKE_SRUN_LOST names nodes whose task prints
# nothing (a task that died).
FAKE_SRUN = r'''
import json, os, subprocess, sys
args = sys.argv[1:]
with open(os.environ["FAKE_SRUN_LOG"], "a") as f:
    f.write(json.dumps(args) + "\n")
if os.environ.get("FAKE_SRUN_BUSY"):
    sys.stderr.write("srun: error: Unable to allocate resources: Requested nodes are busy\n")
    sys.exit(1)
i, nodes = 0, []
while args[i].startswith("-"):
    if args[i] in ("-N", "-w"):
        if args[i] == "-w":
            nodes = args[i + 1].split(",")
        i += 2
    else:
        i += 1
program = args[i:]
lost = os.environ.get("FAKE_SRUN_LOST", "").split(",")
procs = [(node, subprocess.Popen([sys.executable] + program, stdout=subprocess.PIPE,
                                 env=dict(os.environ, SLURMD_NODENAME=node)))
         for node in nodes if node not in lost]
rc, streams = 0, []
for node, proc in procs:
    out = proc.communicate()[0].decode()
    rc = max(rc, proc.returncode)
    if proc.returncode:
        sys.stderr.write("srun: error: %s: task 0: Exited with exit code %d\n" % (node, proc.returncode))
    # As slurmstepd sends a task's output: messages of at most 1024 bytes, cut after the last whole line that fits
    # (inside a line only when none fits).
    messages = []
    while out:
        cut = out.rfind("\n", 0, 1024) + 1 if len(out) > 1024 else len(out)
        messages.append(out[:cut or 1024])
        out = out[cut or 1024:]
    streams.append(messages)
# srun writes the messages of all tasks as they come: here, one of each task in turn.
while any(streams):
    for messages in streams:
        if messages:
            sys.stdout.write(messages.pop(0))
if lost != [""]:
    sys.stderr.write("srun: error: %s: task 0: Killed\n" % lost[0])
    rc = max(rc, 137)
sys.exit(rc)
'''


def install_round_program(directory):
    """The node program and the round code it imports, in ``directory`` as the slurm_compute role installs them;
    returns the program's path."""
    os.makedirs(str(directory), exist_ok=True)
    for src, name in ((PROGRAM, "clusterforge-ib-write-bw-round"), (ROUNDS_SOURCE, "clusterforge_fabric_rounds.py")):
        with open(src) as handle, open(os.path.join(str(directory), name), "w") as out:
            out.write(handle.read())
    return os.path.join(str(directory), "clusterforge-ib-write-bw-round")
