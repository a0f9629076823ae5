"""plugins/module_utils/healthcheck.py: the health check's catalogue, its `dcgmi health -c -j` reader and the
reason-prefix rule, which the node program (installed beside it) and preflight share."""

from ansible_collections.clusterforge.gpu.plugins.module_utils import healthcheck

# `dcgmi health -c -j`, as DCGM 3 and 4 print it: groups of entities, each with its Errors by health system; the
# message is in "overflow" (a list of text pieces).
BODY = {
    "Overall Health": {"value": "Failure"},
    "GPU": {"children": {
        "2": {"value": "Failure", "children": {"Errors": {"children": {
            "Memory": {"value": "Failure", "overflow": ["Detected 2 volatile double-bit ECC error(s)", "in GPU 2."]},
        }}}},
        "5": {"value": "Warning", "children": {"Errors": {"children": {
            "Thermal": {"value": "Warning", "overflow": "Detected clocks event due to thermal violation in GPU 5"},
        }}}},
    }},
}


def test_incidents_are_read_per_entity_and_system_with_their_message_on_one_line():
    assert healthcheck.parse_health_incidents(BODY) == [
        {"group": "GPU", "entity": "2", "system": "Memory", "health": "Failure",
         "text": "Detected 2 volatile double-bit ECC error(s) in GPU 2."},
        {"group": "GPU", "entity": "5", "system": "Thermal", "health": "Warning",
         "text": "Detected clocks event due to thermal violation in GPU 5"},
    ]
    assert healthcheck.parse_health_incidents({"Overall Health": {"value": "Healthy"}}) == []


def test_codes_are_read_back_from_the_messages_of_dcgm_3_and_4():
    assert healthcheck.dcgm_codes("Detected 2 volatile double-bit ECC error(s) in GPU 2.") == [4]
    assert healthcheck.dcgm_codes("Detected clocks event due to thermal violation in GPU 5") == [10]  # DCGM 4
    assert healthcheck.dcgm_codes("Detected clock throttling due to thermal violation in GPU 5") == [10]  # DCGM 3
    assert healthcheck.dcgm_codes("something DCGM has no code for") == []


def test_every_check_has_default_strikes_and_timeout_has_its_own():
    assert set(healthcheck.DEFAULT_STRIKES) == set(healthcheck.CHECKS) | {"timeout"}
    assert all(isinstance(n, int) and n >= 1 for n in healthcheck.DEFAULT_STRIKES.values())


def test_the_reason_prefix_rule():
    assert healthcheck.reason_prefix_problems("cf-health:") == []
    assert healthcheck.reason_prefix_problems(None) == ["must be a string, got NoneType None"]
    assert any("a prefix of 'cf-roll:'" in p for p in healthcheck.reason_prefix_problems("cf-"))
    assert any("Slurm's own drain reason 'Kill task failed'" in p for p in healthcheck.reason_prefix_problems("Kill"))
    assert any("starts with 'NHC:'" in p for p in healthcheck.reason_prefix_problems("NHC: mine"))
