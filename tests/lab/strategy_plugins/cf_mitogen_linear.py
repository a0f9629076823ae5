# Test-only: the lab's Mitogen strategy (`make ... EXECUTOR=mitogen`, `make bench`). It is Mitogen's
# mitogen_linear, with two caches filled once in the controller process before any worker is forked:
#
# - the list of installed collections. Mitogen's planner lists them (ansible.collections.list.list_collection_dirs:
#   a scan of every collection path that reads each collection's metadata) the first time a worker runs a module
#   from a collection, and Ansible forks a new worker for every task and host, so the scan ran once per task and
#   host: about 15% of the controller's CPU in a warm site.yml. Collections do not change during a run.
# - the routing metadata of the collections the playbooks use (ansible.builtin's routing table is about 10,000
#   lines of YAML), and their Jinja filter and test plugins, which each forked worker otherwise parsed and imported
#   again when it first resolved a module or a filter.
#
# Nothing here changes what runs on a host: the same modules with the same arguments.
from __future__ import annotations

import functools
import importlib
import os

import ansible.collections.list
import ansible_mitogen.loaders
import ansible_mitogen.strategy

# Collections whose modules and plugins site.yml and the lab playbooks use.
_PRELOAD = ("ansible.builtin", "ansible.posix", "community.general", "containers.podman", "clusterforge.gpu")


def _memoized_collection_dirs():
    original = ansible.collections.list.list_collection_dirs

    @functools.wraps(original)
    def list_collection_dirs(search_paths=None, coll_filter=None, artifacts_manager=None, dedupe=True):
        if search_paths is not None or coll_filter is not None or artifacts_manager is not None:
            return original(search_paths, coll_filter, artifacts_manager, dedupe)
        return iter(_cached(dedupe))

    @functools.lru_cache(maxsize=None)
    def _cached(dedupe):
        return tuple(original(dedupe=dedupe))

    list_collection_dirs.cf_lab_cached = True
    return list_collection_dirs


if not getattr(ansible.collections.list.list_collection_dirs, "cf_lab_cached", False):
    ansible.collections.list.list_collection_dirs = _memoized_collection_dirs()


@functools.lru_cache(maxsize=None)
def _preload():
    """Once per run (the strategy runs once per play)."""
    from ansible.plugins.loader import filter_loader, test_loader

    dirs = [path.decode() if isinstance(path, bytes) else path for path in ansible.collections.list.list_collection_dirs()]
    for name in _PRELOAD:
        try:
            importlib.import_module("ansible_collections." + name)
        except ImportError:
            continue
    for loader, kind in ((filter_loader, "filter"), (test_loader, "test")):
        for _plugin in loader.all():  # ansible.builtin's
            pass
        for path in dirs:
            fqcn = ".".join(path.rstrip(os.sep).split(os.sep)[-2:])
            if fqcn not in _PRELOAD or not os.path.isdir(os.path.join(path, "plugins", kind)):
                continue
            for entry in sorted(os.listdir(os.path.join(path, "plugins", kind))):
                stem, ext = os.path.splitext(entry)
                if ext == ".yml":  # one documentation file per filter or test
                    try:
                        loader.get_with_context(fqcn + "." + stem)
                    except Exception:  # pylint: disable=broad-except
                        pass  # only a cache: a worker reports a real error itself


Base = ansible_mitogen.loaders.strategy_loader.get("linear", class_only=True)


class StrategyModule(ansible_mitogen.strategy.StrategyMixin, Base):
    def run(self, iterator, play_context, *args, **kwargs):
        _preload()
        return super().run(iterator, play_context, *args, **kwargs)
