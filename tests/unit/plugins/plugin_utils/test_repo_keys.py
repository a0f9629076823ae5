# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A downloaded repository key is accepted only when it is exactly the pinned one."""

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterforge.gpu.plugins.filter.repo_keys import repo_key_problem
from ansible_collections.clusterforge.gpu.plugins.plugin_utils import repo_keys

CUDA = "EB693B3035CD5710E231E123A4B469963BF863CC"
# gpg 2.2 `--show-keys --with-colons` of NVIDIA's 3bf863cc.pub (the layout; one primary key, no subkey)
LISTING = ("pub:-:4096:1:A4B469963BF863CC:1650495306:::-:::scSC::::::23::0:\n"
           "fpr:::::::::EB693B3035CD5710E231E123A4B469963BF863CC:\n"
           "uid:-::::1650495306::BBA5A3D2D2AB5B1C1F55F3C8A7F4A4E4B4E4A4E4::cudatools <cudatools@nvidia.com>::::::::::0:\n")
OTHER = ("pub:-:3072:1:1111111111111111:1650000000:::-:::scSC::::::23::0:\n"
         "fpr:::::::::AAAABBBBCCCCDDDDEEEEFFFF0000111122223333:\n"
         "sub:-:3072:1:2222222222222222:1650000000::::::e::::::23:\n"
         "fpr:::::::::9999888877776666555544443333222211110000:\n")


def test_the_pinned_key_passes_with_or_without_spaces():
    assert repo_keys.key_problem(LISTING, CUDA) == ""
    assert repo_key_problem(LISTING, "EB69 3B30 35CD 5710 E231  E123 A4B4 6996 3BF8 63CC") == ""


def test_another_key_is_refused_naming_both_and_subkeys_are_not_primary_keys():
    msg = repo_keys.key_problem(OTHER, CUDA, what="the CUDA key")
    assert msg == ("the CUDA key has the fingerprint(s) AAAABBBBCCCCDDDDEEEEFFFF0000111122223333, not the pinned " + CUDA)


def test_an_extra_key_beside_the_pinned_one_is_refused():
    assert "not the pinned" in repo_keys.key_problem(LISTING + OTHER, CUDA)


def test_no_key_is_refused():
    assert repo_keys.key_problem("", CUDA) == "the key holds no OpenPGP public key"


@pytest.mark.parametrize("bad", ["", None, "3BF863CC", "ZZ693B3035CD5710E231E123A4B469963BF863CC"])
def test_a_fingerprint_that_is_not_one_is_refused(bad):
    with pytest.raises(ValueError):
        repo_keys.normalize_fingerprint(bad)
    with pytest.raises(AnsibleFilterError):
        repo_key_problem(LISTING, bad)
