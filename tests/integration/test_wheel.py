"""The wheel is the product: built the way the Containerfile builds it, installed into fresh
virtual environments outside the checkout, and used from another directory.

The core environment holds surge's wheel and exactly the distributions its core requirements
need (linked from this interpreter's site-packages, so nothing is downloaded): no Spark, no
matplotlib. In it: ``surge --help``, ``surge examples``, ``surge validate`` of every shipped
spec, ``surge plan`` of the MQ uniform cluster, Native HA and RabbitMQ on Kubernetes, a
20-second run on a local RabbitMQ member (ports from 7610, names ``whl-*``), and the analysis
commands saying what to install. The wheel is a platform one (the compiled hot path, built
with gcc); a pure one (``SURGE_PURE_BUILD=1``) installs into a venv of its own and runs too,
on the pure-Python path. The image environments run the Containerfile's own Python
steps of each target, offline: ``agent`` (the core install) and ``analysis`` (with the
``analysis`` extra), then the commands the Kubernetes manifests run in them.
Deselect with ``-m 'not slow'``.
"""

from __future__ import annotations

import email
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
import zipfile
from importlib import metadata
from pathlib import Path

import psutil
import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
HERE_BIN = Path(sys.executable).parent  # this interpreter's pip and python
PACKAGES = ("orchestrator", "drivers", "topologies", "results")
PORT_BASE = 7610
PURE_PORT = 7650  # the pure wheel's run
RUN_NAME = "whl-run"
STEP_S = 10


# --- the Containerfile ------------------------------------------------------------------------

def containerfile_stages() -> list[list[tuple[str, str]]]:
    """The Containerfile's instructions (keyword, arguments) per stage, continuations joined."""
    text = re.sub(r"\\\n", " ", (REPO / "Containerfile").read_text())
    stages: list[list[tuple[str, str]]] = [[]]
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, arguments = line.partition(" ")
        if keyword.upper() == "FROM":
            stages.append([])
        stages[-1].append((keyword.upper(), arguments.strip()))
    return stages


def stage_named(name: str) -> list[tuple[str, str]]:
    """The stage ``FROM ... AS name``."""
    [stage] = [s for s in containerfile_stages() if s and s[0][0] == "FROM"
               and s[0][1].split()[-2:] == ["AS", name]]
    return stage


def target_chain(name: str) -> list[list[tuple[str, str]]]:
    """The stages building target ``name``: its parent stages (``FROM <stage>``) first."""
    stage = stage_named(name)
    parent = stage[0][1].split()[0]
    named = {s[0][1].split()[-1] for s in containerfile_stages() if s and s[0][0] == "FROM"}
    return (target_chain(parent) if parent in named else []) + [stage]


def target_instructions(name: str, keyword: str) -> list[str]:
    """The arguments of every ``keyword`` instruction that builds target ``name``, in order."""
    return [arguments for stage in target_chain(name) for k, arguments in stage if k == keyword]


def build_args() -> dict[str, str]:
    """The Containerfile's ARG defaults."""
    args = {}
    for stage in containerfile_stages():
        for keyword, arguments in stage:
            if keyword == "ARG" and "=" in arguments:
                name, value = arguments.split("=", 1)
                args[name] = value
    return args


def python_steps(stage: list[tuple[str, str]]) -> list[str]:
    """A stage's RUN commands that make the Python environment (python, pip)."""
    return [arguments for keyword, arguments in stage
            if keyword == "RUN" and re.search(r"\b(pip|python)\b", arguments)]


def run_step(command: str, paths: dict[str, Path], cwd: Path, extra_env: dict[str, str]) -> None:
    """Run one RUN command here: the image's absolute paths mapped to ``paths``, ``python`` and
    ``pip`` this interpreter's, and pip offline."""
    for image_path, here in paths.items():
        command = command.replace(image_path, str(here))
    env = {**clean_env(), "PATH": f"{HERE_BIN}:{os.environ['PATH']}", **build_args(),
           **extra_env, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    done = subprocess.run(["sh", "-ec", command], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"


def copy_build_context(target: Path) -> None:
    """The checkout as the image build sees it: without what .dockerignore leaves out."""
    patterns = [line.strip().removeprefix("**/") for line in
                (REPO / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]

    def ignored(_directory: str, names: list[str]) -> list[str]:
        return [n for n in names if any(fnmatch.fnmatch(n, p) for p in patterns)]
    shutil.copytree(REPO, target, symlinks=True, ignore=ignored)


# --- environments -----------------------------------------------------------------------------

def clean_env() -> dict[str, str]:
    """This process's environment without anything that would put the checkout on the path."""
    return {k: v for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")}


def wheel_metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as archive:
        [name] = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return email.message_from_bytes(archive.read(name))


def closure(requirements: list[str], extras: tuple[str, ...] = ()) -> set[str]:
    """The distributions (installed here) that ``requirements`` need, with ``extras`` of the
    first level, transitively."""
    found: set[str] = set()
    todo = [(r, ("", *extras)) for r in requirements]
    while todo:
        text, wanted = todo.pop()
        requirement = Requirement(text)
        if requirement.marker and not any(requirement.marker.evaluate({"extra": e})
                                          for e in wanted):
            continue
        name = canonicalize_name(requirement.name)
        if name in found:
            continue
        found.add(name)
        requires = metadata.distribution(name).requires or []
        todo += [(r, ("", *requirement.extras)) for r in requires]
    return found


def link_distributions(names: set[str], site: Path) -> None:
    """Make ``names`` importable in a venv whose site-packages is ``site``: each distribution's
    top-level files and folders (its RECORD) linked from this interpreter's site-packages."""
    for name in names:
        dist = metadata.distribution(name)
        assert dist.files is not None, f"{name} has no RECORD"
        source = Path(str(dist.locate_file("")))
        for top in {f.parts[0] for f in dist.files}:
            if top in ("..", "__pycache__") or top.startswith(".."):
                continue
            if not (site / top).exists() and (source / top).exists():
                (site / top).symlink_to(source / top)


def site_packages(venv: Path) -> Path:
    return venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / \
        "site-packages"


def in_venv(venv: Path, *args: str, cwd: Path, env: dict[str, str] | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess:
    """Run a command of the venv (``surge``, ``python``) from ``cwd``."""
    program = str(venv / "bin" / args[0])
    environment = {**clean_env(), "PATH": f"{venv / 'bin'}:{os.environ['PATH']}", **(env or {})}
    return subprocess.run([program, *args[1:]], cwd=cwd, env=environment, capture_output=True,
                          text=True, timeout=timeout)


def ok(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 0, f"{done.args}: exit {done.returncode}\n{done.stdout}\n" \
                                 f"{done.stderr}"
    assert "Traceback" not in done.stderr, done.stderr
    return done.stdout


# --- fixtures ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("whl")


def build_wheel(root: Path, name: str, env: dict[str, str]) -> Path:
    """The wheel, built by the Containerfile's own wheel step from a copy of the build context
    (the checkout is left untouched: no build/ or egg-info in it)."""
    context, dist = root / f"context-{name}", root / f"dist-{name}"
    copy_build_context(context)
    [step] = python_steps(stage_named("wheel"))
    # offline and fast: this interpreter's setuptools and Cython instead of an isolated build
    run_step(step, {"/dist": dist}, context, {"PIP_NO_BUILD_ISOLATION": "0", **env})
    [built] = dist.glob("surge-*.whl")
    return built


def core_venv(root: Path, name: str, wheel: Path) -> Path:
    """A fresh venv with ``wheel`` and the closure of its core requirements only."""
    venv = root / name
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=60)
    core_requirements = wheel_metadata(wheel).get_all("Requires-Dist")
    link_distributions(closure(core_requirements), site_packages(venv))
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"),
                    "install", "-q", "--no-deps", "--no-index", str(wheel)],
                   check=True, timeout=120, env=clean_env())
    return venv


@pytest.fixture(scope="module")
def wheel(root) -> Path:
    """The platform wheel: the compiled hot path built with this machine's gcc."""
    return build_wheel(root, "platform", {})


@pytest.fixture(scope="module")
def core(root, wheel) -> Path:
    return core_venv(root, "core", wheel)


@pytest.fixture(scope="module")
def pure(root) -> Path:
    """A fresh venv with the pure wheel (``SURGE_PURE_BUILD=1``: what a machine without a
    compiler builds)."""
    built = build_wheel(root, "pure", {"SURGE_PURE_BUILD": "1"})
    assert built.name.endswith("-py3-none-any.whl"), built.name
    return core_venv(root, "pure", built)


@pytest.fixture(scope="module")
def elsewhere(root) -> Path:
    away = root / "elsewhere"
    away.mkdir()
    return away


@pytest.fixture(scope="module")
def examples(core, elsewhere) -> Path:
    ok(in_venv(core, "surge", "examples", "ex", cwd=elsewhere))
    return elsewhere / "ex"


@pytest.fixture(scope="module")
def local_run(core, examples, elsewhere, root):
    """``surge run`` of the quickstart on one local member in this test's port range, 20 s."""
    state = root / "state"
    done = in_venv(core, "surge", "run", str(examples / "scenarios" / "quickstart.yaml"),
                   "--no-live", "--runs-dir", "runs",
                   "--set", f"topology.name={RUN_NAME}", "--set", f"topology.port_base={PORT_BASE}",
                   "--set", "topology.members=1", "--set", "topology.start=1",
                   "--set", "workload.senders=5", "--set", "workload.receivers=5",
                   "--set", f"plan.0.hold={STEP_S}s", "--set", f"plan.1.hold={STEP_S}s",
                   "--set", "plan.1.repeat=1",
                   cwd=elsewhere, env={"SURGE_STATE_DIR": str(state)}, timeout=300)
    return done, [d for d in (elsewhere / "runs").iterdir() if d.is_dir()]


# --- the core install -------------------------------------------------------------------------

def test_surge_is_imported_from_the_fresh_venv_not_the_checkout(core, elsewhere):
    probe = ("import json, sys, importlib.util as u; import " + ", ".join(PACKAGES) + "\n"
             "print(json.dumps({'files': {n: sys.modules[n].__file__ for n in "
             f"{PACKAGES!r}}}, 'editable': [m for m in sys.modules if 'editable' in m] + "
             "[type(f).__name__ for f in sys.meta_path if 'ditable' in type(f).__name__], "
             "'analysis': [n for n in ('pyspark', 'matplotlib', 'numpy') if u.find_spec(n)]}))")
    found = json.loads(ok(in_venv(core, "python", "-c", probe, cwd=elsewhere)))
    site = str(site_packages(core))
    for name, file in found["files"].items():
        assert file.startswith(site + os.sep), f"{name} from {file}, not {site}"
        assert not file.startswith(str(REPO)), file
    assert found["editable"] == []
    assert found["analysis"] == []  # the core install is lean


def test_help_and_examples(core, examples, elsewhere):
    assert "examples" in ok(in_venv(core, "surge", "--help", cwd=elsewhere))
    assert {p.relative_to(examples) for p in examples.rglob("*.yaml")} == \
        {p.relative_to(REPO) for d in ("scenarios", "topologies", "campaigns")
         for p in (REPO / d).glob("*.yaml")}
    for schema in (REPO / "schemas").glob("*.schema.json"):  # the ones the first lines name
        assert (examples / "schemas" / schema.name).read_text() == schema.read_text()
    again = in_venv(core, "surge", "examples", "ex", cwd=elsewhere)
    assert again.returncode == 2 and "--force" in again.stderr


def test_every_shipped_spec_validates(core, examples, elsewhere):
    files = sorted(str(p) for p in examples.rglob("*.yaml"))
    out = ok(in_venv(core, "surge", "validate", *files, cwd=elsewhere))
    assert out.count(": ok (") == len(files) > 20


@pytest.mark.parametrize("scenario, overrides, expected", [
    ("mq-uniform-cluster-scaling.yaml", [], ["# Topology mq-uc01-uniform", "## /nfs1/UC01.json"]),
    ("mq-native-ha-requester-sweep.yaml", [], ["kind: QueueManager", "kind: ConfigMap"]),
    ("quickstart.yaml", ["--set", "topology=../topologies/k8s-rabbitmq-3.yaml"],
     ["kind: RabbitmqCluster", "name: k8s-rabbitmq-3"]),
])
def test_plans_render_from_the_shipped_templates(core, examples, elsewhere, scenario, overrides,
                                                 expected):
    out = ok(in_venv(core, "surge", "plan", str(examples / "scenarios" / scenario), *overrides,
                     cwd=elsewhere))
    for text in expected:
        assert text in out
    assert "## Load plan" in out


def test_a_local_run_records_and_skips_the_analysis(local_run, root, wheel):
    done, run_dirs = local_run
    out = ok(done)
    assert len(run_dirs) == 1, run_dirs
    manifest = json.loads((run_dirs[0] / "run.json").read_text())
    assert manifest["outcome"] == "completed" and len(manifest["steps"]) == 2
    assert re.search(r"-cp\d+-cp\d+-linux_\w+\.whl$", wheel.name), wheel.name
    assert manifest["hot_path"] == {"on": True, "why": ""}
    assert "hot path: compiled" in out
    assert re.search(r"^ *step +senders +receivers +queues +target msg/s +achieved msg/s", out,
                     re.MULTILINE)
    assert "what saturated:" in out
    assert "analysis skipped" in out and "pip install 'surge[analysis]'" in out
    assert {"ticks", "members"} <= {p.parent.name for p in run_dirs[0].rglob("*.parquet")}
    left = []
    for process in psutil.process_iter(["cmdline", "status"]):
        command = " ".join(process.info["cmdline"] or [])
        if process.info["status"] != psutil.STATUS_ZOMBIE and (
                str(root) in command or RUN_NAME in command
                or re.search(rf"epmd.*-port {PORT_BASE + 30000}\b", command)):
            left.append(f"{process.pid} {command}")
    assert not left, f"left behind: {left}"


def test_the_pure_wheel_installs_and_runs_the_pure_path(pure, examples, elsewhere, root):
    """The same quickstart, one 5-second step on a member of its own, from the pure wheel:
    it runs, accounts for every message and says it ran the pure path."""
    name = "whl-pure"
    done = in_venv(pure, "surge", "run", str(examples / "scenarios" / "quickstart.yaml"),
                   "--no-live", "--runs-dir", "runs-pure",
                   "--set", f"topology.name={name}", "--set", f"topology.port_base={PURE_PORT}",
                   "--set", "topology.members=1", "--set", "topology.start=1",
                   "--set", "workload.senders=2", "--set", "workload.receivers=2",
                   "--set", "plan.0.hold=5s", "--set", "plan.1.hold=5s",
                   "--set", "plan.1.repeat=1",
                   cwd=elsewhere, env={"SURGE_STATE_DIR": str(root / "state-pure")},
                   timeout=300)
    out = ok(done)
    [run_dir] = [d for d in (elsewhere / "runs-pure").iterdir() if d.is_dir()]
    manifest = json.loads((run_dir / "run.json").read_text())
    assert manifest["outcome"] == "completed"
    assert manifest["hot_path"] == {"on": False,
                                    "why": "not built in this install (a pure wheel)"}
    assert "hot path: pure (not built in this install (a pure wheel))" in out
    assert manifest["accounting"]["lost"] == 0 and manifest["accounting"]["received"] > 0
    assert not [so for package in PACKAGES for so in (site_packages(pure) / package).rglob("*.so")]


def test_analyze_without_the_extra_says_what_to_install(core, local_run, elsewhere):
    _, run_dirs = local_run
    done = in_venv(core, "surge", "analyze", str(run_dirs[0]), cwd=elsewhere)
    assert done.returncode == 2
    assert "pip install 'surge[analysis]'" in done.stderr and "pyspark" in done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    compared = ok(in_venv(core, "surge", "compare", str(run_dirs[0]), cwd=elsewhere))
    assert re.search(r"^quickstart +500 ", compared, re.MULTILINE)  # no Spark needed


def test_the_page_and_the_dashboard_ship_in_the_wheel(core, local_run, elsewhere):
    _, run_dirs = local_run
    server = subprocess.Popen([str(core / "bin" / "surge"), "view", str(run_dirs[0])],
                              cwd=elsewhere, env=clean_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        url = server.stdout.readline().split(": ", 1)[1].split()[0]
        with urllib.request.urlopen(url + "static/uPlot.iife.min.js", timeout=10) as script:
            assert len(script.read()) > 40_000
        with urllib.request.urlopen(url + "api/board", timeout=10) as board:
            assert json.loads(board.read())["run"]["scenario"] == "quickstart"
    finally:
        server.terminate()
        server.wait(10)
    shipped = ok(in_venv(core, "python", "-c", "from importlib import resources; print((resources"
                         ".files('results') / 'grafana' / 'surge-dashboard.json').is_file())",
                         cwd=elsewhere))
    assert shipped.strip() == "True"


# --- the images -------------------------------------------------------------------------------

TARGETS = ("agent", "analysis")


def step_extras(step: str) -> tuple[str, ...]:
    """The extras a ``pip install`` step asks for with the wheel (``"$1[a,b]"``)."""
    found = re.search(r'"\$1\[([\w,]+)\]"', step)
    return tuple(found.group(1).split(",")) if found else ()


@pytest.fixture(scope="module")
def images(root, wheel) -> dict[str, Path]:
    """Each target's Python steps (in every stage it is built from) run here: its venv, then the
    wheel with the extras each step names, offline (their distributions are linked in first, so
    pip finds them satisfied)."""
    requirements = wheel_metadata(wheel).get_all("Requires-Dist")
    built = {}
    for target in TARGETS:
        venv = root / f"image-{target}"
        steps = [s for stage in target_chain(target) for s in python_steps(stage)]
        assert "-m venv /opt/surge" in steps[0], steps
        paths = {"/opt/surge": venv, "/dist": wheel.parent}
        run_step(steps[0], paths, root, {})
        for step in steps[1:]:
            assert "/dist/surge-*.whl" in step and "pip install" in step, steps
            link_distributions(closure(requirements, step_extras(step)) - {"surge"},
                               site_packages(venv))
            run_step(step, paths, root, {})
        built[target] = venv
    return built


def test_the_images_install_the_wheel_with_extras_that_exist(images, wheel, elsewhere):
    probe = ("import importlib.metadata as m, importlib.util as u, orchestrator; "
             "print(m.version('surge'), orchestrator.__file__, "
             "','.join(n for n in ('pyspark', 'matplotlib') if u.find_spec(n)) or '-')")
    extras = {target: {e for s in target_instructions(target, "RUN") for e in step_extras(s)}
              for target in TARGETS}
    assert extras == {"agent": set(), "analysis": {"analysis"}}
    assert extras["analysis"] <= set(wheel_metadata(wheel).get_all("Provides-Extra"))
    for target, venv in images.items():
        version, file, analysis = ok(in_venv(venv, "python", "-c", probe, cwd=elsewhere)).split()
        assert version == wheel.name.split("-")[1] and file.startswith(str(venv))
        assert analysis == ("pyspark,matplotlib" if target == "analysis" else "-"), target


def test_the_images_run_as_a_numeric_user_and_only_analysis_has_java():
    for target in TARGETS:
        user = target_instructions(target, "USER")[-1]
        assert user.isdigit() and int(user) != 0, (target, user)
        java = any("default-jre-headless" in r for r in target_instructions(target, "RUN"))
        assert java == (target == "analysis"), target


def test_the_manifests_commands_exist_in_their_images(images, elsewhere):
    assets = Path(str(site_packages(images["agent"]))) / "topologies" / "assets" / "k8s"
    from orchestrator.agents.pods import render_agents
    from orchestrator.specs.loader import load_topology
    topology = load_topology(REPO / "topologies" / "k8s-rabbitmq-3.yaml")
    job = render_agents(2, topology, "run-1", "t" * 24, 600, templates=assets / "agents")["job"]
    cronjob = yaml.safe_load((assets / "base" / "analyze-cronjob.yaml").read_text())
    [agent] = job["spec"]["template"]["spec"]["containers"]
    [analyze] = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    assert "Host workers" in ok(in_venv(images["agent"], *agent["command"], "--help",
                                        cwd=elsewhere))
    assert "--spark-master" in ok(in_venv(images["analysis"], *analyze["command"], "--help",
                                          cwd=elsewhere))
    from orchestrator.specs.hosts import RabbitKubernetesSpec
    tags = {"agent": RabbitKubernetesSpec().agent_image, "analysis": analyze["image"]}
    for target, tag in tags.items():
        for document in (REPO / "Containerfile", REPO / "docs" / "guide" / "getting-started.md"):
            assert f"build --target {target} -t {tag} ." in document.read_text(), document
    pods = (job["spec"]["template"]["spec"],
            cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"])
    users = {str(pod["securityContext"]["runAsUser"]) for pod in pods}
    assert users == {target_instructions(t, "USER")[-1] for t in TARGETS}


def test_the_wheel_is_small_and_complete(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert "topologies/assets/k8s/agents/job.yaml" in names
    assert "orchestrator/examples/scenarios/quickstart.yaml" in names
    assert not any(n.startswith(("tests/", "bench/")) for n in names)
    assert wheel.stat().st_size < 1_000_000
