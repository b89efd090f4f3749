"""ScenarioLogs files each log record under the scenario that emitted it, whatever thread it came from."""

from __future__ import annotations

import io
import logging
import threading
from pathlib import Path

from conformance.events import Outcome, RunFinished, ScenarioFinished, ScenarioStarted
from conformance.reporting import TerminalReporter
from conformance.reporting.logs import ScenarioLogs, adopt, adopt_files, log_path

log = logging.getLogger("fake_worker.test")


class Engine:
    """Stands for an engine or worker the reference target adopts: it logs from its own threads."""

    def work(self) -> None:
        log.warning("engine of this scenario speaking")

    def crash(self) -> None:
        raise RuntimeError("a thread of this scenario died")


def on_thread(fn, *args) -> None:
    t = threading.Thread(target=fn, args=args, name="pool-thread")
    t.start()
    t.join()


def finished(scenario: str) -> ScenarioFinished:
    return ScenarioFinished(scenario=scenario, pair="p+q", sidecar="p", worker="q", outcome=Outcome.FAILED,
                            duration_s=0.1, requirements=(), message="boom")


def test_records_go_to_the_scenario_of_the_thread_or_of_the_adopted_object(tmp_path: Path):
    echo = io.StringIO()
    engines: dict[str, Engine] = {}

    def scenario(name: str) -> None:
        logs.handle_event(ScenarioStarted(scenario=name, pair="p+q"))
        engines[name] = Engine()
        adopt(engines[name])
        log.warning("harness of %s", name)  # on the scenario's own thread
        on_thread(engines[name].work)  # on a thread the scenario did not name
        on_thread(engines[name].crash)  # an exception that ends a thread
        stderr = tmp_path / f"{name.replace('/', '-')}-driver.stderr.log"  # a target process's output
        stderr.write_text(f"driver of {name} says hello\n", encoding="utf-8")
        empty = tmp_path / "driver.stdout.log"
        empty.write_text("", encoding="utf-8")
        adopt_files(stderr, empty)
        logs.handle_event(finished(name))

    with ScenarioLogs(out_dir=tmp_path, verbose_stream=echo) as logs:
        for name in ("area/one", "area/two"):
            on_thread(scenario, name)
        on_thread(log.warning, "nobody's")
    one = log_path(tmp_path, pair="p+q", scenario="area/one").read_text(encoding="utf-8")
    two = log_path(tmp_path, pair="p+q", scenario="area/two").read_text(encoding="utf-8")
    assert "harness of area/one" in one and "harness of area/two" not in one
    assert "engine of this scenario speaking" in one and "engine of this scenario speaking" in two
    assert "[pool-thread]" in one  # the emitting thread, for reading interleavings
    assert "RuntimeError: a thread of this scenario died" in one and "Traceback" in one
    assert "driver of area/one says hello" in one and "driver of area/two" not in one
    assert "area-one-driver.stderr.log" in one and "driver.stdout.log" not in one  # empty files are left out
    assert "nobody's" in (tmp_path / "logs" / "run.log").read_text(encoding="utf-8")
    assert "nobody's" not in one + two
    assert "[area/two on p+q] " in echo.getvalue()  # -v: shown, tagged with the scenario
    assert logs.written[("p+q", "area/one")] == log_path(tmp_path, pair="p+q", scenario="area/one")
    # Uninstalled: the root logger and the thread hook are as before.
    assert logs not in logging.getLogger().handlers and threading.excepthook is not logs._thread_exception


def test_a_failure_on_the_terminal_names_its_log_file(tmp_path: Path):
    out = io.StringIO()
    path = tmp_path / "x.log"
    reporter = TerminalReporter(out, logs={("p+q", "area/one"): path})
    reporter.handle(finished("area/one"))
    reporter.handle(finished("area/two"))
    reporter.handle(RunFinished(run_id="r", finished_at=0.0, duration_s=1.0, counts={}))
    text = out.getvalue()
    assert text.count("log: ") == 1 and f"log: {path}" in text.split("area/two")[0]


def test_junit_attaches_a_failed_scenarios_log_as_system_err(tmp_path: Path):
    import xml.etree.ElementTree as ET

    from conformance.events import RunStarted
    from conformance.reporting.junit import render_junit

    for name in ("area/one", "area/two"):
        path = log_path(tmp_path, pair="p+q", scenario=name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"12:00:00.000 WARNING fake_worker [w] line of {name}\n", encoding="utf-8")
    passed = ScenarioFinished(scenario="area/two", pair="p+q", sidecar="p", worker="q", outcome=Outcome.PASSED,
                              duration_s=0.1, requirements=())
    events = [RunStarted(run_id="r", started_at=0.0, pairs=("p+q",), scenario_count=2, command="c"),
              finished("area/one"), passed, RunFinished(run_id="r", finished_at=1.0, duration_s=1.0, counts={})]
    cases = {c.get("name"): c for c in ET.fromstring(render_junit(events, reports=tmp_path)).iter("testcase")}
    err = cases["area/one"].find("system-err")
    assert err is not None and "line of area/one" in err.text
    assert cases["area/two"].find("system-err") is None  # a passing scenario's log stays in its file
    assert ET.fromstring(render_junit(events)).find(".//system-err") is None


def test_a_runs_logs_replace_the_last_runs_but_never_a_users_folder(tmp_path: Path):
    with ScenarioLogs(out_dir=tmp_path):
        on_thread(log.warning, "first run")
    with ScenarioLogs(out_dir=tmp_path):
        on_thread(log.warning, "second run")
    assert "first run" not in (tmp_path / "logs" / "run.log").read_text(encoding="utf-8")
    mine = tmp_path / "mine"
    (mine / "logs").mkdir(parents=True)
    (mine / "logs" / "keep.txt").write_text("the user's", encoding="utf-8")
    with ScenarioLogs(out_dir=mine):
        on_thread(log.warning, "a run")
    assert (mine / "logs" / "keep.txt").read_text(encoding="utf-8") == "the user's"
    assert "a run" in (mine / "logs" / "run.log").read_text(encoding="utf-8")
