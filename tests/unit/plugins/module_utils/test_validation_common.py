"""Number formatting of the validation messages (plugins/module_utils/validation_common.py)."""

from ansible_collections.clusterforge.gpu.plugins.module_utils.validation_common import _fmt_apart


def test_a_miss_never_reads_as_two_equal_numbers():
    """A 32-node scale run failed with "dd write 0.02 GB/s < 0.02 GB/s": the texts get decimals until they differ."""
    assert _fmt_apart(0.0195, 0.02, 2) == ("0.019", "0.020")
    assert _fmt_apart(0.01999, 0.02, 2) == ("0.01999", "0.02000")
    assert _fmt_apart(1.5, 0.02, 2) == ("1.50", "0.02")
    assert _fmt_apart(0.02, 0.02, 2) == ("0.02", "0.02")
    assert _fmt_apart(3, 2.0, 1) == ("3", "2.0")
