# ClusterForge: `make lab` and `make test` do all the set-up on a fresh clone.
# Fast inner loop: `make test-unit`, `make lint`, `make molecule ROLE=<name>`.
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
.DEFAULT_GOAL := help

ROOT      := $(CURDIR)
VENV      := $(ROOT)/.venv
BIN       := $(VENV)/bin
PY        ?= python3
COLL_LINK := $(ROOT)/.cache/collections/ansible_collections/clusterforge/gpu
export CONTAINERS_CONF        := $(ROOT)/tests/lab/containers.conf
export ANSIBLE_CONFIG         := $(ROOT)/tests/lab/ansible.cfg
export ANSIBLE_COLLECTIONS_PATH := $(ROOT)/.cache/collections
export ANSIBLE_ROLES_PATH     := $(ROOT)/roles
export ANSIBLE_FORCE_COLOR    := 0
export PATH                   := $(BIN):$(PATH)
export PYTHONDONTWRITEBYTECODE := 1

# EXECUTOR=mitogen runs the lab's playbooks with the Mitogen strategy (cf_mitogen_linear: Mitogen's mitogen_linear,
# from requirements.txt, with per-run caches, tests/lab/strategy_plugins) over `podman exec` kept open per host
# (tests/lab/mitogen_connection.yml), instead of Ansible's own executor over cf_lab_nsenter: `make lab EXECUTOR=mitogen`.
# `make bench` measures both. See docs/performance.md.
EXECUTOR ?= ansible
MITOGEN_PLUGINS := $(ROOT)/.cache/mitogen
LAB_INVENTORY := -i inventories/lab
ifeq ($(EXECUTOR),mitogen)
export ANSIBLE_STRATEGY_PLUGINS := $(MITOGEN_PLUGINS)/strategy:$(ROOT)/tests/lab/strategy_plugins
export ANSIBLE_STRATEGY         := cf_mitogen_linear
LAB_INVENTORY += -i tests/lab/mitogen_connection.yml
endif

ROLES_WITH_MOLECULE = $(sort $(patsubst roles/%/molecule/default/molecule.yml,%,$(wildcard roles/*/molecule/default/molecule.yml)))
# The lab's end-to-end modules, in this order (they share one converged lab: tests/lab/conftest.py).
LAB_TESTS ?= $(foreach m,e2e health monitoring security deep failing bios brownfield,$(wildcard tests/lab/test_lab_$(m).py))
# Every scenario runs on Debian 13 (trixie, Slurm 24.11), the lab's platform; the Slurm roles' scenarios run again on
# Debian 12 (bookworm, Slurm 22.05), so both Slurm majors are proven by every `make test`.
# `make molecule ROLE=<role> SUITE=bookworm` runs one scenario on Debian 12.
SUITE ?= trixie
# The unit and integration tiers run in this many pytest-xdist workers (each test is independent: its own tmp_path,
# inventories and ansible-playbook runs); 0 runs them in one process.
PYTEST_WORKERS ?= $(shell nproc 2>/dev/null || echo 2)
ROLES_ON_BOTH_SUITES = slurm_controller slurm_compute
phase = @printf '\n==> [%s] %s\n' "$$(date +%H:%M:%S)" "$(1)"

.PHONY: help deps venv link bootstrap lab lab-up lab-converge lab-validate lab-down lint yamllint ansible-lint \
        changelog-lint docs-lint \
        sanity test-unit test-integration molecule molecule-all images checks stream-checks stream-lab test-lab test bench bench-scale build ee clean

help:
	@echo "make lab        install what is missing, start the container lab, run site.yml (and validation)"
	@echo "make lab-down   remove the lab containers"
	@echo "make bench      lab benchmarks with 2, 4 and 8 GPU nodes (docs/performance.md)"
	@echo "make bench-scale  scale lab: 8, 16, 32 and 64 cloned GPU nodes (docs/performance.md)"
	@echo "make test       yamllint, ansible-lint, ansible-test sanity, unit tests, every molecule scenario, lab end-to-end"
	@echo "make test-unit  unit and conformance tests only (seconds)"
	@echo "make lint       yamllint, ansible-lint (production profile), antsibull-changelog lint, antsibull-docs lint"
	@echo "make molecule ROLE=<name>   one role's molecule scenario"
	@echo "make build      ansible-galaxy collection build"

# --- set-up -------------------------------------------------------------------------------------------------
deps:
	$(call phase,system packages)
	@tests/lab/bootstrap-host.sh

$(BIN)/.stamp: requirements.txt
	$(call phase,python venv .venv from requirements.txt)
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	@$(BIN)/python -m pip install -q --upgrade pip >/dev/null
	@$(BIN)/python -m pip install -q -r requirements.txt
	@touch $@

venv: $(BIN)/.stamp

STALE_COPY := $(HOME)/.ansible/collections/ansible_collections/clusterforge/gpu

link:
	@mkdir -p $(dir $(COLL_LINK)) .cache/facts
	@test -L $(COLL_LINK) || ln -sfn $(ROOT) $(COLL_LINK)
	@# Mitogen's plugins at a fixed path (EXECUTOR=mitogen, make bench), wherever pip put the package.
	@if [ -x $(BIN)/python ] && d=$$($(BIN)/python -c 'import ansible_mitogen.plugins as p, os; print(os.path.dirname(p.__file__))' 2>/dev/null); then \
	  ln -sfn "$$d" $(MITOGEN_PLUGINS); fi
	@# An installed copy of this collection in ~/.ansible/collections (left by an older molecule prerun or a
	@# manual install) would shadow the checkout for ansible-lint: remove it.
	@if [ -d "$(STALE_COPY)" ] && [ ! -L "$(STALE_COPY)" ]; then \
	  echo "removing a stale installed copy of clusterforge.gpu: $(STALE_COPY)"; rm -rf "$(STALE_COPY)"; fi

bootstrap: deps venv link

# --- the lab ------------------------------------------------------------------------------------------------
lab: bootstrap lab-up lab-converge lab-validate
	$(call phase,lab converged (make lab-down removes it))

lab-up: bootstrap
	$(call phase,lab containers)
	@tests/lab/lab.sh up
	$(call phase,test-only hardware emulators into the lab)
	@ansible-playbook $(LAB_INVENTORY) tests/lab/emulators.yml

lab-converge: link
	$(call phase,site.yml against inventories/lab)
	@ansible-playbook $(LAB_INVENTORY) site.yml

lab-validate: link
	@if [ -f playbooks/validate.yml ] && ! grep -q 'import_playbook: validate.yml' playbooks/site.yml; then \
	  printf '\n==> validation\n'; ansible-playbook $(LAB_INVENTORY) playbooks/validate.yml; fi

lab-down:
	$(call phase,removing the lab)
	@tests/lab/lab.sh down

# --- tests --------------------------------------------------------------------------------------------------
yamllint: venv
	$(call phase,yamllint)
	@yamllint -s .

ansible-lint: venv link
	$(call phase,ansible-lint (production profile))
	@ansible-lint --offline

# The release notes' fragments (changelogs/fragments) and the plugins' and roles' documentation, as the Ansible
# docsite and antsibull-changelog read them (docs/releasing.md).
changelog-lint: venv
	$(call phase,antsibull-changelog lint)
	@antsibull-changelog lint

docs-lint: venv link
	$(call phase,antsibull-docs lint-collection-docs --plugin-docs)
	@antsibull-docs lint-collection-docs --plugin-docs .

lint: link yamllint ansible-lint changelog-lint docs-lint

sanity: venv
	$(call phase,ansible-test sanity)
	@tests/sanity/run.sh

test-unit: venv link
	@tests/report/install-chromium.sh
	@tests/tools/install-prometheus.sh
	$(call phase,unit and conformance tests)
	@pytest -q -n $(PYTEST_WORKERS) tests/unit tests/lab/unit tests/bench tests/conformance tests/report

test-integration: venv link
	$(call phase,integration: preflight against broken inventories)
	@pytest -q -n $(PYTEST_WORKERS) tests/integration

molecule: bootstrap
	@test -n "$(ROLE)" || { echo "usage: make molecule ROLE=<role> [SUITE=trixie|bookworm]"; exit 2; }
	@CF_LAB_SUITE=$(SUITE) tests/lab/lab.sh image
	$(call phase,molecule scenario of role $(ROLE) on $(SUITE))
	@cd roles/$(ROLE) && CF_MOLECULE_SUITE=$(SUITE) molecule test

# MOLECULE_ROLES: the scenarios to run (default every role's); each runs on Debian 13 and, for the roles of
# ROLES_ON_BOTH_SUITES, again on Debian 12. Stops at the first failing scenario.
MOLECULE_ROLES ?= $(ROLES_WITH_MOLECULE)
molecule-all: bootstrap
	@CF_LAB_SUITE=trixie tests/lab/lab.sh image
	@CF_LAB_SUITE=bookworm tests/lab/lab.sh image
	@for r in $(MOLECULE_ROLES); do \
	  for s in trixie bookworm; do \
	    case " $(ROLES_ON_BOTH_SUITES) " in *" $$r "*) ;; *) [ "$$s" = trixie ] || continue ;; esac; \
	    printf '\n==> [%s] molecule: %s on %s\n' "$$(date +%H:%M:%S)" "$$r" "$$s"; \
	    (cd roles/$$r && CF_MOLECULE_SUITE=$$s molecule test) || exit 1; \
	  done; \
	done

# The end-to-end test starts from a lab created from nothing (a cold converge, as on new servers); LAB_REUSE=1
# keeps a running lab for the inner loop.
test-lab: bootstrap
	$(call phase,lab end-to-end)
	@if [ "$(LAB_REUSE)" != 1 ]; then tests/lab/lab.sh down; fi
	@pytest -q --durations=25 $(LAB_TESTS)

# Both suites' images first (molecule-all and test-lab would otherwise build the trixie one at the same time), then
# two streams side by side (tests/tools/side_by_side.sh; SIDE_BY_SIDE=0 runs them one after another):
#   stream-lab:    the lab's end-to-end tests (the longest single target, so they start at once);
#   stream-checks: lint, sanity, unit, integration, then every molecule scenario.
# Each stream runs all its targets and fails if any failed.
images: bootstrap
	@CF_LAB_SUITE=trixie tests/lab/lab.sh image
	@CF_LAB_SUITE=bookworm tests/lab/lab.sh image

checks: lint sanity test-unit test-integration molecule-all

# The lab is the longest stream: every other tier runs beside it. Measured on a clean clone (2026-11-29, at 2e2b5fc,
# with integration and three scenarios after the lab): the checks stream ended at 34 minutes, the lab at 42.4, and
# integration and the Lustre client, monitoring and NCCL scenarios took the lab's stream on to 50.5 minutes with
# nothing beside them; they now run in the checks stream: at b59b4c4 both streams ended at about 39 minutes, the
# run at 40.5 (docs/testing.md). MOLECULE_AFTER_LAB names scenarios to run
# in the lab's stream after the lab instead (none by default; each scenario's containers and network have names of
# their own, so two scenarios can run at once).
MOLECULE_AFTER_LAB ?=
stream-checks:
	@rc=0; for t in lint sanity test-unit test-integration; do $(MAKE) --no-print-directory $$t || { rc=1; echo "stream-checks: $$t failed"; }; done; \
	  $(MAKE) --no-print-directory molecule-all MOLECULE_ROLES="$(filter-out $(MOLECULE_AFTER_LAB),$(ROLES_WITH_MOLECULE))" \
	    || { rc=1; echo "stream-checks: molecule-all failed"; }; exit $$rc

stream-lab:
	@rc=0; $(MAKE) --no-print-directory test-lab || { rc=1; echo "stream-lab: test-lab failed"; }; \
	  if [ -n "$(strip $(filter $(MOLECULE_AFTER_LAB),$(ROLES_WITH_MOLECULE)))" ]; then \
	    $(MAKE) --no-print-directory molecule-all MOLECULE_ROLES="$(filter $(MOLECULE_AFTER_LAB),$(ROLES_WITH_MOLECULE))" \
	      || { rc=1; echo "stream-lab: molecule-all failed"; }; fi; exit $$rc

test: bootstrap images
	$(call phase,the lab end-to-end tests beside lint sanity unit integration and molecule (each line names its stream))
	@MAKE="$(MAKE)" tests/tools/side_by_side.sh stream-checks stream-lab
	$(call phase,all tests passed)

# Benchmarks on the lab (not a timed test): bench/results.json, bench/results.svg, docs/performance.md.
BENCH_SIZES ?= 2 4 8
bench: bootstrap
	$(call phase,benchmarks: $(BENCH_SIZES) GPU nodes (replaces the lab))
	@python tests/bench/bench.py --sizes $(BENCH_SIZES)

# The scale lab (not a timed test): GPU nodes cloned from one converged node; warm site.yml, validate.yml and a
# rolling change at each size; bench/scale.json, bench/scale.svg, docs/performance.md. Replaces the lab.
SCALE_SIZES ?= 8 16 32 64
bench-scale: bootstrap
	$(call phase,scale lab: $(SCALE_SIZES) GPU nodes (replaces the lab))
	@python tests/bench/scale.py --sizes $(SCALE_SIZES)

build: venv
	$(call phase,ansible-galaxy collection build)
	@mkdir -p .cache/build && ansible-galaxy collection build --force --output-path .cache/build

# The execution environment's build context (ansible-builder v3; building the image needs a registry):
# .cache/ee. tests/unit/test_execution_environment.py runs the same in `make test`.
ee: build
	$(call phase,ansible-builder create: build context of the execution environment in .cache/ee)
	@ansible-builder create --file execution-environment.yml --context .cache/ee

clean: lab-down
	rm -rf .cache tests/output
