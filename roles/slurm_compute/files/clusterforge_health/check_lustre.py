# Installed by the clusterforge.gpu collection (role slurm_compute); local changes are overwritten.
"""The lustre check: every configured Lustre mount point is mounted."""


def check_lustre(r):
    if not r.on("lustre"):
        return
    cfg = r.cfg
    try:
        with open(cfg["mounts_file"]) as handle:
            table = [line.split() for line in handle if line.strip()]
    except OSError as exc:
        r.fail("lustre", "cannot read %s: %s" % (cfg["mounts_file"], exc))
        return
    lustre = set(f[1] for f in table if len(f) > 2 and f[2] == "lustre")
    for path in cfg["lustre_mounts"]:
        if path.rstrip("/") not in lustre and path not in lustre:
            r.fail("lustre", "Lustre not mounted at %s" % path)
    r.passed("lustre")
