"""pytest plugin: scenario files under a `scenarios/` folder are collected as test items.

    pytest scenarios/                                         # the reference pair
    pytest scenarios/ --conformance-worker dapr-ext-workflow -n auto --alluredir out
    pytest scenarios/ --conformance-requirement ACT-ALO-001 --conformance-reports reports/

Every option of `conformance run` is here as `--conformance-NAME` (conformance/run_options.py
declares them once for both). Each item runs one scenario on one pair with the runner of
`conformance run`, so a scenario gets the same verdict, failure text and "Reproduce with:" line
either way. A declared gap or a missing capability is a skip that names it; it never hides a
failure of a requirement the target claims.

- allure: with allure-pytest's `--alluredir`, each item carries the labels, description,
  parameters and attachments (protocol transcript, its JSON, the timeline) of
  `conformance.reporting.allure`, the same ones `conformance run` writes.
- reports: with `--conformance-reports DIR`, the matrix, JUnit, summary.json and events.jsonl of
  the items that ran (merged across pytest-xdist workers) are written there at the end.
- pytest-xdist: in a session of scenarios only, `-n` hands each worker a fixed share of the items
  (conformance/pytest_shares.py; a session with other tests keeps xdist's own scheduling);
  items that must have a shared engine to themselves (`--conformance-sidecar address`; they restart
  or cut the worker's connection) are one group, all in one share, and also take the engine's lock
  across processes.
- concurrency: items mostly wait on the engine, so each process runs the items it will run ahead of
  time, in threads, as `conformance run --jobs` does: a plain `pytest` run keeps `--conformance-jobs`
  items in flight over its whole order, an xdist worker its part of them over its share. `-n auto`
  runs as many processes as `conformance run` does by default, one: the session's own (xdist starts
  no worker), `-n N` asks for N workers. Results are taken in pytest's order, so verdicts, reports
  and `-x` read as in a serial run.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

_PAIRS = pytest.StashKey[list]()
_OPTIONS = pytest.StashKey[Any]()
_EVENTS = pytest.StashKey[list]()
_SELECTION = pytest.StashKey[Any]()
_SHARED = pytest.StashKey[Path]()
_SHARED_LOADED = pytest.StashKey[dict]()
_SHARED_INPUT = "conformance_scenarios"
_STARTED = pytest.StashKey[float]()
_EVENTS_OUTPUT = "conformance_events"
_AHEAD = pytest.StashKey[Any]()
_SHARED_OUT = pytest.StashKey[bool]()
_SHARES_INPUT = "conformance_shares"
_AUTO_IN_PROCESS = pytest.StashKey[bool]()
_LOGS = pytest.StashKey[Any]()
_WORK = pytest.StashKey[Path]()
_WORK_LOCK = threading.Lock()


def pytest_addoption(parser: pytest.Parser) -> None:
    from conformance.run_options import add_to_pytest

    group = parser.getgroup("conformance", "taskhub-conformance scenarios (the options of `conformance run`)")
    add_to_pytest(group.addoption)
    group.addoption("--conformance-library", action="store_true", default=False,
                    help="also collect the shipped scenario library (the folder `conformance targets` names), "
                         "e.g. from an SDK's own repository where no scenarios/ folder is on the command line")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "requirement(id): the requirement ids a scenario covers")
    _XDIST_NODES.clear()
    if "conformance.stopping" in sys.modules:  # an earlier session in this process was interrupted
        sys.modules["conformance.stopping"].reset()
    config.stash[_EVENTS] = []
    config.stash[_STARTED] = time.time()
    if config.getoption("conformance_library", default=False):
        from conformance.library import find_library

        library = str(find_library().scenarios)
        # Without paths of the user's, pytest would also collect the folder it runs in (or testpaths).
        if config.args_source is pytest.Config.ArgsSource.ARGS:
            config.args.append(library)
        else:
            config.args[:] = [library]
    # In a run of scenarios only, xdist's default distribution becomes the shares of
    # conformance/pytest_shares.py. A run that also collects other tests (the project's own
    # `./dev test`, whose testpaths include scenarios/) keeps xdist's own scheduling untouched.
    if getattr(config.option, "dist", "no") == "load" and _only_scenarios(config):
        config.option.dist = "loadgroup"
        config.stash[_SHARED_OUT] = True
    # An xdist worker reads --dist from its own command line, which never had our switch: without this,
    # xdist (with pytest before 9) would not append the group to the worker's node ids.
    if getattr(config, "workerinput", {}).get(_SHARES_INPUT):
        config.option.loadgroup = True


@pytest.hookimpl(wrapper=True)
def pytest_sessionstart(session: pytest.Session) -> Any:
    """Check the options and prepare the targets (an SDK checkout's environment) once, in the controller,
    before pytest-xdist starts its workers (which then find them ready); after the header, say what
    `-n auto` did."""
    config = session.config
    if not hasattr(config, "workerinput") and _wants_conformance(config):
        _pairs(config)
        _selection(config)
        if getattr(config.option, "numprocesses", None):
            _share_scenarios(config)
    _file_logs(config)
    result = yield
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if config.stash.get(_AUTO_IN_PROCESS, False) and reporter is not None:
        # Once, at the top: the user asked xdist for workers and gets none.
        reporter.write_line(
            f"-n auto: running in this process: no xdist worker; {_jobs(config)} scenarios in flight at "
            "once (--conformance-jobs), as `conformance run` does by default. Scenarios wait on the engine, and "
            "each worker is one more Python process to start (docs/pytest.md); -n N starts N workers.")
    return result


def _file_logs(config: pytest.Config) -> None:
    """With --conformance-reports: each scenario's log lines go to `<reports>/logs/<pair>/<scenario>.log`, as
    in `conformance run` (its JUnit case's <system-err> reads them). The controller makes the folder before
    xdist starts its workers, which write into it."""
    if not _wants_conformance(config) and not hasattr(config, "workerinput"):
        return
    options = _options(config)
    if options.reports is None or options.no_reports:
        return
    from conformance.reporting.logs import ScenarioLogs

    logs = ScenarioLogs(out_dir=options.reports, fresh=not hasattr(config, "workerinput")).install()
    config.stash[_LOGS] = logs
    config.add_cleanup(logs.uninstall)


def _share_scenarios(config: pytest.Config) -> None:
    """Load every scenario file under the session's paths once, for the xdist workers to take as they are
    (each worker would otherwise parse the whole library again); a file that does not load is left to
    the workers, whose collection reports it."""
    import tempfile

    from conformance.errors import InputError
    from conformance.scenario.loader import load_scenario
    from conformance.scenario.shared import dump_scenarios

    loaded: dict[str, Any] = {}
    for arg in config.args:
        path = Path(str(arg).split("::")[0])
        files = sorted(path.rglob("*.yaml")) if path.is_dir() else [path]
        for file in files:
            root = _scenario_root(file.resolve())
            if root is None or not file.is_file() or not _named(config, file.resolve()):
                continue
            try:
                loaded[str(file.resolve())] = load_scenario(_as_given(config, file.resolve()),
                                                            root=_as_given(config, root))
            except InputError:
                continue
    handle, name = tempfile.mkstemp(prefix="conformance-scenarios-", suffix=".pickle")
    os.close(handle)
    config.stash[_SHARED] = dump_scenarios(loaded, Path(name))
    config.add_cleanup(lambda: Path(name).unlink(missing_ok=True))


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    if _SHARED in node.config.stash:
        node.workerinput[_SHARED_INPUT] = str(node.config.stash[_SHARED])
    node.workerinput[_SHARES_INPUT] = _shares_out(node.config)


def _shares_out(config: pytest.Config) -> bool:
    """Whether this run's xdist scheduler hands out the fixed shares (a worker then runs its share ahead)."""
    return bool(config.stash.get(_SHARED_OUT, False))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if not _shares_out(config):
        return None
    from conformance.pytest_shares import ShareScheduling

    return ShareScheduling(config, log, group_of=lambda nodeid: _group_of_id(config, nodeid))


def _group_of_id(config: pytest.Config, nodeid: str) -> str | None:
    """In the controller, which has node ids but no items: the group `ScenarioItem.group` gives the item."""
    from conformance.pytest_shares import group_of

    path, _, label = nodeid.partition("::")
    label = label.split("@")[0]
    scenario = _shared_scenario_in_controller(config, (config.rootpath / path).resolve())
    pair = next((p for p in _pairs(config) if p.label == label), None)
    if scenario is not None and pair is not None:
        return _alone_group(scenario, pair)
    return group_of(nodeid)


def _shared_scenario_in_controller(config: pytest.Config, path: Path) -> Any | None:
    if _SHARED_LOADED not in config.stash and _SHARED in config.stash:
        from conformance.scenario.shared import load_scenarios

        config.stash[_SHARED_LOADED] = load_scenarios(config.stash[_SHARED])
    return config.stash.get(_SHARED_LOADED, {}).get(str(path))


def _alone_group(scenario: Any, pair: Any) -> str | None:
    """The `xdist_group` of an item that must have a shared engine to itself (conformance/runner/isolation.py),
    else None: the one rule, for items (in a worker) and for node ids (in the controller)."""
    from conformance.runner.isolation import needs_engine_alone, shares_engine

    return f"engine-alone-{pair.sidecar.name}" if shares_engine(pair) and needs_engine_alone(scenario) else None


def _shared_scenario(config: pytest.Config, path: Path) -> Any | None:
    """The scenario the controller loaded for `path`, in an xdist worker (None: load it here)."""
    name = getattr(config, "workerinput", {}).get(_SHARED_INPUT)
    if not name:
        return None
    if _SHARED_LOADED not in config.stash:
        from conformance.scenario.shared import load_scenarios

        config.stash[_SHARED_LOADED] = load_scenarios(Path(name))
    return config.stash[_SHARED_LOADED].get(str(path.resolve()))


def _options(config: pytest.Config) -> Any:
    if _OPTIONS not in config.stash:
        from conformance.run_options import RunOptions

        config.stash[_OPTIONS] = RunOptions.read(lambda dest: config.getoption(f"conformance_{dest}", default=None))
    return config.stash[_OPTIONS]


def _jobs(config: pytest.Config) -> int:
    from conformance.run_options import DEFAULT_JOBS

    return _options(config).jobs or DEFAULT_JOBS


def _only_scenarios(config: pytest.Config) -> bool:
    """Whether the session collects scenarios and nothing else: only then does the plugin choose xdist's
    scheduling and `-n auto`'s count (a mixed run, e.g. testpaths of tests/ and scenarios/, keeps xdist's)."""
    if (config.getoption("conformance_library", default=False)
            and config.args_source is not pytest.Config.ArgsSource.ARGS):
        return True  # the library replaces the session's paths (in pytest_configure, after -n auto's count)
    paths = [Path(str(arg).split("::")[0]) for arg in config.args]
    return bool(paths) and all(p.name == "scenarios" or _scenario_root(p.resolve()) is not None for p in paths)


def _wants_conformance(config: pytest.Config) -> bool:
    """Whether this session runs scenarios (its options are checked and its targets prepared at the start)."""
    given = any(config.getoption(f"conformance_{d}", default=None) not in (None, [], False)
                for d in ("worker", "sidecar", "requirement", "scenario", "reports"))
    return given or bool(config.getoption("conformance_library", default=False)) or any(
        part == "scenarios" for arg in config.args for part in Path(str(arg)).parts)


# tryfirst: xdist's own implementation (the core count) is registered after ours and would answer first.
@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto` on scenarios: no xdist worker, as `conformance run` keeps its jobs in one process by
    default. Scenarios wait on the engine, so one process keeps --conformance-jobs of them in flight in
    threads; a worker is one more whole Python process to start (imports, assertion rewriting,
    collection: ~1.7 s of CPU each, docs/pytest.md), which a 2-core machine pays in wall time."""
    if not _only_scenarios(config):
        return None
    config.stash[_AUTO_IN_PROCESS] = True
    return 0


def _as_given(config: pytest.Config, path: Path) -> Path:
    """`path` (absolute, as pytest collects it) as `conformance run --scenarios ARG` names it for the same
    ARG: relative to where pytest started when the user's argument covering it was relative, so the
    failure text's `[scenarios/x.yaml:5]` reads the same either way."""
    here = config.invocation_params.dir
    for arg in config.args:
        given = Path(str(arg).split("::")[0])
        if given.is_absolute():
            continue
        base = (here / given).resolve()
        if (path == base or base in path.parents) and path.is_relative_to(here):
            return path.relative_to(here)
    return path


def _as_given_with_root(config: pytest.Config, path: Path, root: Path) -> tuple[Path, Path]:
    """`path` as given (`_as_given`) and its scenarios root named the same way: `pytest scenarios/timers`
    names the file relative but not the root, which a relative file must be read against."""
    given, here = _as_given(config, path), config.invocation_params.dir
    if given.is_absolute():
        return path, root
    if root.is_relative_to(here):
        return given, root.relative_to(here)
    return path, root  # a root above where pytest started (run inside the library): both absolute


def _scenario_root(path: Path) -> Path | None:
    for parent in path.parents:
        if parent.name == "scenarios":
            return parent
    return None


def pytest_collect_file(parent: pytest.Collector, file_path: Path) -> pytest.Collector | None:
    if file_path.suffix == ".yaml" and _named(parent.config, file_path):
        return ScenarioFile.from_parent(parent, path=file_path)
    return None


def _named(config: pytest.Config, path: Path) -> bool:
    """A scenario file the --conformance-scenario globs take: the others are not read (as the CLI's)."""
    root = _scenario_root(path)
    return root is not None and _selection(config).names(path.relative_to(root).with_suffix("").as_posix())


def _pairs(config: pytest.Config) -> list[Any]:
    """The pairs of the run, checked once (a mistake in the options stops the session before any item)."""
    if _PAIRS not in config.stash:
        from conformance.errors import InputError
        from conformance.run_options import build_pairs

        try:
            config.stash[_PAIRS] = build_pairs(_options(config))
        except InputError as exc:
            raise pytest.UsageError(f"conformance: {exc.render()}") from None
    return config.stash[_PAIRS]


def _selection(config: pytest.Config) -> Any:
    """The selection options as one predicate, the CLI's (`conformance.run_options.Selection`)."""
    if _SELECTION not in config.stash:
        from conformance.errors import InputError
        from conformance.library import find_library
        from conformance.reporting.catalogue import load_catalogue
        from conformance.run_options import CATALOGUE, selection

        roots = [find_library().scenarios, *(r for a in config.args if (r := _scenario_root(Path(str(a)) / "x")))]
        folders = {p.name for root in roots if root.is_dir() for p in root.iterdir() if p.is_dir()}
        try:
            config.stash[_SELECTION] = selection(_options(config), catalogue=load_catalogue(CATALOGUE), folders=folders)
        except InputError as exc:
            raise pytest.UsageError(f"conformance: {exc.render()}") from None
    return config.stash[_SELECTION]


class ScenarioFile(pytest.File):
    def collect(self):  # type: ignore[override]
        from conformance.errors import InputError
        from conformance.scenario.loader import load_scenario
        from conformance.scenario.model import Direction

        root = _scenario_root(self.path)
        assert root is not None
        scenario = _shared_scenario(self.config, self.path)
        try:
            path, root = _as_given_with_root(self.config, self.path, root)
            scenario = scenario or load_scenario(path, root=root)
        except InputError as exc:
            raise CollectError(exc.render()) from None
        if not _selection(self.config).selects(scenario):
            return
        for pair in _pairs(self.config):
            if pair.direction is Direction.SELF or pair.direction in scenario.applies_to:
                yield ScenarioItem.from_parent(self, name=pair.label, scenario=scenario, pair=pair)


class CollectError(Exception):
    pass


class ScenarioItem(pytest.Item):
    def __init__(self, *, scenario: Any, pair: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scenario, self.pair = scenario, pair
        self.allure_case: Any = None  # its AllureCase once run, with --alluredir
        for req in scenario.requirements:
            self.add_marker(pytest.mark.requirement(req))
        self.group = _alone_group(scenario, pair)
        self.alone = self.group is not None
        if self.group:
            self.add_marker(pytest.mark.xdist_group(self.group))

    def runtest(self) -> None:
        from conformance.events import Outcome
        from conformance.reporting.allure import annotate_pytest_item, scenario_case
        from conformance.reporting.catalogue import load_catalogue
        from conformance.run_options import CATALOGUE
        options = _options(self.config)
        ahead = self.config.stash.get(_AHEAD, None)
        result = ahead.take(self) if ahead is not None else None
        if result is None:
            result = self.execute()
        self.config.stash[_EVENTS].append(result)
        self.user_properties.append(("requirements", " ".join(self.scenario.requirements)))
        if _allure_active(self.config):
            self.allure_case = scenario_case(result, catalogue=load_catalogue(CATALOGUE), failing=options.failing)
            annotate_pytest_item(self.allure_case)
        outcome = result.outcome
        from conformance.reporting.model import failure_text

        # Before the skips: `--conformance-fail-on known` fails a known failure, as `--fail-on known` does.
        if outcome in options.failing:
            raise (ScenarioError if outcome is Outcome.ERROR else ScenarioFailed)(failure_text(result))
        if outcome in (Outcome.KNOWN_FAILURE, Outcome.NOT_APPLICABLE):
            pytest.skip(f"{'known failure' if outcome is Outcome.KNOWN_FAILURE else 'not applicable'}: "
                        f"{result.gap_reason}")
        if outcome in (Outcome.WARNING, Outcome.OBSERVATION):  # shown, not failed (unless --conformance-fail-on)
            self.user_properties.append((outcome.value.lower(), result.message))

    def execute(self) -> Any:
        """Run the scenario (in pytest's thread or ahead of time in another): its ScenarioFinished."""
        from conformance.events import Outcome
        from conformance.reproduce import Invocation, installed_run_words, reproduce_command
        from conformance.runner.execute import run_scenario
        from conformance.runner.isolation import process_engine_turn

        options = _options(self.config)
        root = _scenario_root(self.path)
        invocation = Invocation(run=installed_run_words(), options=tuple(_reproduce_extra(options, scenarios=root)),
                                reports=None if options.no_reports else options.reports)
        reproduce = reproduce_command(self.scenario.id, sidecar=self.pair.sidecar.name, worker=self.pair.worker.name,
                                      invocation=invocation)
        logs = self.config.stash.get(_LOGS, None)
        work_root = _work_root(self.config)
        if logs is None:
            with process_engine_turn(self.pair, alone=self.alone, address=options.sidecar_address or ""):
                return run_scenario(self.scenario, self.pair, reproduce=reproduce, work_root=work_root)
        from conformance.events import ScenarioFinished, ScenarioStarted

        # On this thread, as the CLI's runner says it: its log records (and its targets') are the scenario's.
        logs.handle_event(ScenarioStarted(scenario=self.scenario.id, pair=self.pair.label))
        result = None
        try:
            with process_engine_turn(self.pair, alone=self.alone, address=options.sidecar_address or ""):
                result = run_scenario(self.scenario, self.pair, reproduce=reproduce, work_root=work_root)
            return result
        finally:
            logs.handle_event(result if result is not None else ScenarioFinished(
                scenario=self.scenario.id, pair=self.pair.label, sidecar=self.pair.sidecar.name,
                worker=self.pair.worker.name, outcome=Outcome.ERROR, duration_s=0.0, requirements=()))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, (ScenarioFailed, ScenarioError)):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int, str]:
        line = self.scenario.span.line - 1 if self.scenario.span else 0
        return self.path, line, f"{self.scenario.id} [{self.pair.label}]"


def _work_root(config: pytest.Config) -> Path:
    """One folder for this process's scenario folders, removed at the end when every scenario passed (or did
    not apply), as `conformance run` does; kept otherwise, since a failure's message names files in it."""
    with _WORK_LOCK:  # items run ahead call this from their threads
        root = config.stash.get(_WORK, None)
        if root is None:
            root = config.stash[_WORK] = Path(tempfile.mkdtemp(prefix="conformance-run-"))
            config.add_cleanup(lambda: _drop_work(config, root))
    return root


def _drop_work(config: pytest.Config, root: Path) -> None:
    from conformance.verdict import NOTHING_TO_READ

    if all(r.outcome in NOTHING_TO_READ for r in config.stash.get(_EVENTS, ())):
        shutil.rmtree(root, ignore_errors=True)


# ------------------------------------------------------------------------- items run ahead of time

class _Ahead:
    """Scenario items started before pytest reaches them, in threads; pytest takes their results in its
    own order. `order` is what this process will run: the session's items, or an xdist worker's share.
    An item that needs a shared engine alone is never run ahead, nor beside one: the items after it
    start only once pytest has passed it."""

    def __init__(self, *, order: list[pytest.Item] | None, threads: int) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.order = order  # None: unknown beyond the item pytest runs and the next one
        self.position = {item.nodeid: n for n, item in enumerate(order or ())}
        self.started_to = 0  # order[:started_to] have been started (or run by pytest itself)
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="scenario-ahead")
        self.running: dict[str, Any] = {}  # nodeid -> Future[ScenarioFinished]

    def reached(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        """pytest is at `item`: start it and what follows it in the order, up to the next item that
        must run alone (an item not in the order runs in pytest's thread)."""
        if self.order is None:
            self._start([item, *([nextitem] if nextitem is not None else [])])
            return
        n = self.position.get(item.nodeid)
        if n is None or n < self.started_to:
            return
        self.started_to = n + self._start(self.order[n:])

    def _start(self, items: list[pytest.Item]) -> int:
        """Start `items` up to the first that must not run ahead; how many that was."""
        n = 0
        for later in items:
            if not isinstance(later, ScenarioItem) or later.alone:
                break
            if later.nodeid not in self.running:
                self.running[later.nodeid] = self.pool.submit(later.execute)
            n += 1
        return n

    def take(self, item: "ScenarioItem") -> Any | None:
        future = self.running.pop(item.nodeid, None)
        return None if future is None else future.result()

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    if not isinstance(item, ScenarioItem) or item.alone:
        return
    config = item.config
    if _AHEAD not in config.stash:
        config.stash[_AHEAD] = _ahead_of(item.session)
    config.stash[_AHEAD].reached(item, nextitem)


def _ahead_of(session: pytest.Session) -> _Ahead:
    """A plain run knows its whole order and keeps --conformance-jobs items in flight; an xdist worker
    of the share scheduler knows its share and keeps its part of them; another xdist worker knows only
    the item it runs and the next (xdist's `load` hands out no more): it keeps those two in flight."""
    from conformance.pytest_shares import group_of, shares, worker_index

    config = session.config
    jobs = max(1, _jobs(config))
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        return _Ahead(order=list(session.items), threads=jobs)
    count, k = int(workerinput.get("workercount", 1)), worker_index(str(workerinput.get("workerid", "")))
    if not workerinput.get(_SHARES_INPUT) or k is None or k >= count:
        return _Ahead(order=None, threads=2)
    groups = [getattr(i, "group", None) or group_of(i.nodeid) for i in session.items]
    share = shares(groups, workers=count)[k]
    return _Ahead(order=[session.items[i] for i in share], threads=max(1, -(-jobs // count)))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A scenario item's report without pytest's captured output and log records: scenarios run ahead of
    time in threads, so what pytest captures while it runs an item is other scenarios' as much as its own
    (the failure text already ends with the item's own log lines). Inside allure-pytest's wrapper (ours is
    registered first), so its `log`/`stdout` attachments of other scenarios' lines go too."""
    report = yield
    if isinstance(item, ScenarioItem):
        report.sections = [(title, text) for title, text in report.sections if not title.startswith("Captured ")]
    return report


def pytest_runtest_teardown(item: pytest.Item) -> None:
    """Inside allure-pytest's teardown: the scenario's own times, status message and name on its result."""
    case = getattr(item, "allure_case", None)
    if isinstance(item, ScenarioItem) and case is not None:
        from conformance.reporting.allure import finish_pytest_item

        finish_pytest_item(item.config, case)


class ScenarioFailed(AssertionError):
    """A MUST broken (allure: failed)."""


class ScenarioError(Exception):
    """The harness or the target could not run the scenario (allure: broken)."""


def _reproduce_extra(options: Any, *, scenarios: Path | None) -> list[str]:
    """The CLI's options for this item: its scenario folder is the one pytest collected it from."""
    import dataclasses

    from conformance.run_options import reproduce_options

    return reproduce_options(dataclasses.replace(options, scenarios=scenarios))


def _allure_active(config: pytest.Config) -> bool:
    return bool(getattr(config.option, "allure_report_dir", None))


# -------------------------------------------------------------------------------- reports at the end


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if exitstatus == pytest.ExitCode.INTERRUPTED and not config.pluginmanager.has_plugin("dsession"):
        # Ctrl-C: the scenarios still running give up now and the processes they started are ended by
        # pid (they lead sessions of their own, which the terminal's SIGINT does not reach); without
        # this the run waited for them, and xdist SIGKILLed a worker that waited, leaving them behind.
        from conformance.stopping import stop_now
        from conformance.targets.process import end_live_processes

        stop_now()
        end_live_processes()
    if _AHEAD in config.stash:  # items run ahead that pytest never reached (-x, an interrupt)
        config.stash[_AHEAD].close()
    if exitstatus == pytest.ExitCode.INTERRUPTED and _shares_out(config) and _stopped_for_failures(config):
        # xdist stops a run for -x/--maxfail by raising its Interrupted, a KeyboardInterrupt, so pytest
        # would exit 2 (interrupted) where a plain run (and `conformance run`) exits 1 for the failure.
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    results = config.stash.get(_EVENTS, [])
    if hasattr(config, "workerinput"):  # an xdist worker: hand its results to the controller
        from conformance.events import to_json

        config.workeroutput[_EVENTS_OUTPUT] = [to_json(r) for r in results]  # type: ignore[attr-defined]
        return
    if not results:
        return
    options = _options(config)
    if options.reports is not None and not options.no_reports:
        _write_reports(config, results, out_dir=options.reports)
    if _allure_active(config):
        _write_allure_run_files(config, results)


def _stopped_for_failures(config: pytest.Config) -> bool:
    """Whether xdist's controller stopped the run for -x/--maxfail (its message), not for a Ctrl-C."""
    dsession = config.pluginmanager.getplugin("dsession")
    return str(getattr(dsession, "shouldstop", "") or "").startswith("stopping after")


# The xdist controller's workers (pytest_keyboard_interrupt is given no config to find them by).
_XDIST_NODES: list[Any] = []


@pytest.hookimpl(optionalhook=True)
def pytest_testnodeready(node: Any) -> None:
    _XDIST_NODES.append(node)


def pytest_keyboard_interrupt(excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    """Ctrl-C in the controller of an xdist run: pass it on to every worker at once (each then stops its
    scenarios as above). A terminal's Ctrl-C reaches them anyway; a SIGINT to the pytest process alone
    would reach them only after execnet's own wait (5 s, then it SIGINTs the worker; xdist SIGKILLs a
    worker still running 10 s after the shutdown)."""
    import signal

    try:
        from xdist.dsession import Interrupted
    except ImportError:
        return
    if isinstance(excinfo.value, Interrupted):  # -x/--maxfail, not a Ctrl-C
        return
    for node in _XDIST_NODES:
        popen = getattr(getattr(node.gateway, "_io", None), "popen", None)  # execnet's popen gateway
        pid = getattr(popen, "pid", None)
        if isinstance(pid, int):
            try:
                os.kill(pid, signal.SIGINT)
            except ProcessLookupError:
                pass


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    from conformance.events import from_json

    lines = getattr(node, "workeroutput", {}).get(_EVENTS_OUTPUT, [])
    node.config.stash[_EVENTS].extend(from_json(line) for line in lines)


def _run_events(config: pytest.Config, results: list[Any]) -> list[Any]:
    from collections import Counter

    from conformance.events import Outcome, RunFinished, RunStarted

    started = config.stash[_STARTED]
    run_id = uuid.uuid4().hex[:12]
    pairs = tuple(dict.fromkeys(r.pair for r in results))
    ordered = sorted(results, key=lambda r: (r.started_at, r.pair, r.scenario))
    counts = Counter(r.outcome.value for r in ordered)
    command = " ".join(["pytest", *config.invocation_params.args])
    return [RunStarted(run_id=run_id, started_at=started, pairs=pairs, scenario_count=len(ordered), command=command),
            *ordered,
            RunFinished(run_id=run_id, finished_at=time.time(), duration_s=time.time() - started,
                        counts={o.value: counts.get(o.value, 0) for o in Outcome})]


def _write_reports(config: pytest.Config, results: list[Any], *, out_dir: Path) -> None:
    from conformance.reporting import write_reports
    from conformance.reporting.catalogue import load_catalogue
    from conformance.run_options import CATALOGUE

    # allure's results are allure-pytest's (--alluredir); the other reports are the CLI's.
    written = write_reports(events=_run_events(config, results), out_dir=out_dir,
                            catalogue=load_catalogue(CATALOGUE), allure=False)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line("conformance reports: " + ", ".join(str(p) for p in written.values()))


def _write_allure_run_files(config: pytest.Config, results: list[Any]) -> None:
    from conformance.reporting.allure import write_run_files

    events = _run_events(config, results)
    write_run_files(Path(config.option.allure_report_dir), run_id=events[0].run_id, pairs=events[0].pairs,
                    command=events[0].command, started_at=events[0].started_at)
