"""Stand-in for the pip bootstrap script that ansible-test downloads (test-only; see tests/sanity/run.sh).

ansible-test creates a venv per sanity test and bootstraps pip with a get-pip.py fetched from a host that is
not reachable here. It first looks in ~/.ansible/test/cache/get_pip_<version>.py; run.sh puts this file
there. It installs pip with ensurepip (in a child process: ensurepip sets PIP_CONFIG_FILE=/dev/null in its
own environment, which would hide the machine's pip configuration and certificates) and then runs
``pip install`` with the packages ansible-test asked for, in the environment this script started with.
"""
import os
import subprocess
import sys

env = dict(os.environ)
subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade", "--default-pip"], env=dict(env))
args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
if args:
    subprocess.check_call([sys.executable, "-m", "pip", "install", "--disable-pip-version-check"] + args, env=env)
