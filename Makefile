# Two commands for a fresh Debian machine (as root): `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
RABBIT := /usr/lib/rabbitmq/bin/rabbitmq-server
SSHD   := /usr/sbin/sshd

.PHONY: demo test deps java openssl chromium prometheus kubectl ssh mqemu lint docs bench bench-deps images clean

demo: deps  ## run the quickstart on a local 3-member RabbitMQ cluster, print the step table
	$(BIN)/surge run scenarios/quickstart.yaml

# The test modules run JOBS at a time (a module's tests together, in order; each module's
# brokers and queue managers have ports of their own, each worker its own shared cluster):
# about 17 min with 3, 55 with JOBS=1. Tests marked `alone` (they time a rate to a few per
# cent, a fault's effect, a tick) then run one at a time, about 13 min, also when the others
# failed.
JOBS ?= 3

test: deps  ## the whole test suite: unit tests and integration tests against real brokers
ifeq ($(JOBS),1)
	$(BIN)/pytest -q
else
	$(BIN)/pytest -q -n $(JOBS) --dist loadfile -m "not alone"; side_by_side=$$?; \
	$(BIN)/pytest -q -m alone --durations=8 && exit $$side_by_side
endif

lint: deps
	$(BIN)/ruff check .

docs: deps  ## rewrite the generated reference and build the site into site/ (strict)
	$(BIN)/python -m orchestrator.docs
	$(BIN)/mkdocs build --strict

bench: deps bench-deps  ## every benchmark, about 80 min; each keeps its output in bench/results/
	$(BIN)/python bench/driver_efficiency.py
	$(BIN)/python bench/routing_cost.py
	$(BIN)/python bench/decoder_speed.py
	$(BIN)/python bench/usl_reach.py
	$(BIN)/python bench/controller_scale.py
	$(BIN)/python bench/startup.py
	$(BIN)/python bench/efficiency.py
	$(BIN)/python bench/http_flood.py
	$(BIN)/python bench/web_page.py
	$(BIN)/python bench/rate_accuracy.py --hold 21
	$(BIN)/python bench/generators.py --rounds 3 --seconds 8
	$(BIN)/python bench/analysis.py
	$(BIN)/python bench/scaling.py --run
	$(BIN)/python bench/sample_integrity.py $$(ls -d runs/*-uniform-cluster-scaling | tail -1)

bench-deps:  ## the C client of bench/generators.py is compiled against librabbitmq
	$(call apt,/usr/include/amqp.h,librabbitmq-dev gcc)

images:  ## build and check both Containerfile targets with podman, 8 to 10 min (not part of test)
	$(call apt,podman,podman)
	$(call apt,buildah,buildah)
	$(call apt,/usr/sbin/debootstrap,debootstrap)
	tests/images/build.sh

deps: $(RABBIT) ssh java openssl chromium prometheus kubectl mqemu $(BIN)/surge

# $(call apt,COMMAND-OR-FILE,PACKAGES): install Debian PACKAGES unless COMMAND-OR-FILE is there.
# apt runs under a policy-rc.d that refuses every service start (ours only if none exists): the
# tests start their own sshd and Prometheus on loopback, never the system's.
define apt
	@[ -e $(1) ] || command -v $(1) >/dev/null || { created=; \
		if [ ! -e /usr/sbin/policy-rc.d ]; then printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d \
			&& chmod 755 /usr/sbin/policy-rc.d && created=1; fi; \
		trap '[ -z "$$created" ] || rm -f /usr/sbin/policy-rc.d' EXIT; \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive \
			apt-get install -y -q --no-install-recommends $(2); }
endef

mqemu:  ## the MQI emulator's libmqm_r.so (tests/mqemu) is compiled by the tests with gcc
	$(call apt,/usr/include/pthread.h,gcc libc6-dev)

chromium:  ## the live page's tests open it in Debian's headless Chromium (surge never needs it)
	$(call apt,chromium,chromium)

kubectl:  ## the deploy package's tests render k8s/base with `kubectl kustomize` (built in, offline)
	$(call apt,kubectl,kubernetes-client)

openssl:  ## the TLS tests make their own certificate authority with the openssl command
	$(call apt,openssl,openssl)

java:  ## Spark (surge analyze) needs a Java runtime, 17 or later
	$(call apt,java,default-jre-headless)

prometheus:  ## tests scrape a run with Debian's Prometheus and check the dashboard's PromQL with promtool
	$(call apt,prometheus,prometheus)

ssh:  ## the SSH tests start their own sshd on loopback
	$(call apt,$(SSHD),openssh-server openssh-client)

$(RABBIT):
	$(call apt,$(RABBIT),rabbitmq-server python3-venv python3-dev gcc)

# pip's output goes to $(VENV)/pip.log, shown (its end) only if pip fails.
PIP := $(BIN)/pip --disable-pip-version-check
# The compiled hot path is built in place (gcc, from the $(RABBIT) step's packages); make deps
# builds it again when its sources change. SURGE_SPEEDUPS=0 runs the pure-Python code instead.
$(BIN)/surge: pyproject.toml setup.py drivers/_speedups.pyx results/rundir/_histogram.pyx
	$(PYTHON) -m venv $(VENV)
	@echo "installing surge into $(VENV) (pip's output: $(VENV)/pip.log)"
	@{ $(PIP) install --upgrade pip && $(PIP) install -e '.[dev]' && \
		$(BIN)/python setup.py -q build_ext --inplace; } >$(VENV)/pip.log 2>&1 || \
		{ tail -n 30 $(VENV)/pip.log; echo "pip failed; all of its output: $(VENV)/pip.log"; exit 1; }
	touch $@

clean:
	rm -rf $(VENV) runs
