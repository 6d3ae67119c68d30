# Two commands for a fresh Debian machine (as root): `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
RABBIT := /usr/lib/rabbitmq/bin/rabbitmq-server

.PHONY: demo test deps java lint bench clean

demo: deps  ## run the quickstart on a local 3-member RabbitMQ cluster, print the step table
	$(BIN)/surge run scenarios/quickstart.yaml

test: deps  ## the whole test suite: unit tests and integration tests against real brokers
	$(BIN)/pytest -q

lint: deps
	$(BIN)/ruff check .

bench: deps  ## driver efficiency and rate accuracy benchmarks (print figures)
	$(BIN)/python bench/driver_efficiency.py
	$(BIN)/python bench/rate_accuracy.py

deps: $(RABBIT) java $(BIN)/surge

java:  ## Spark (surge analyze) needs a Java runtime, 17 or later
	@command -v java >/dev/null || { apt-get update -q && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -q --no-install-recommends default-jre-headless; }

$(RABBIT):
	apt-get update -q
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
		rabbitmq-server python3-venv python3-dev gcc

$(BIN)/surge: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

clean:
	rm -rf $(VENV) runs
