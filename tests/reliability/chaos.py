"""The chaos harness: mixed producers against a real broker that is SIGKILLed again and again.

Producers keep their own records (:class:`Ledger`) of what they meant and what the
broker acknowledged. A request cut off by a kill is an UNKNOWN outcome that the
producer resolves after the restart the way a real client would:

- plain produce is idempotent produce (producer id, epoch, base sequence): the
  same batch is retried and answered with its original offsets;
- a half message whose prepare answer was lost is prepared again with the same
  ``transaction_id``; a lost commit / rollback is retried;
- a mode-2 produce is retried with its sequence (transactional producer) or the
  transaction is aborted (Pulsar-style, no producer); a lost commit is settled
  with ``GET /v1/transactions/{id}``.

Half messages left unresolved on purpose ("forgotten") are answered by a real
callback server from the producer's own record. At the end the whole log is read
and compared with the ledger: every committed value exactly once and where the
broker said it was, nothing rolled back / aborted ever visible to
``read_committed``, no half message left unresolved, group offsets equal to the
producers' model and never ahead of the data.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from tests.support.broker_process import BrokerProcess

TOPIC = "chaos"
OUT_TOPIC = "chaos-out"
PARTITIONS = 4
OUT_PARTITIONS = 2
PRODUCER_GROUP = "chaos-producers"  # answers back-checks through a callback server
POLLING_GROUP = "chaos-pollers"  # answers back-checks by long-polling GET /checks

# Broker settings for the chaos runs: a fast checker that never gives up on a half message.
CHAOS_SETTINGS: dict[str, object] = {
    "check_interval_seconds": 0.5,
    "transaction_timeout_seconds": 1,
    "check_max": 1000,
    "check_timeout_seconds": 2,
    "lease_seconds": 2,
    "poll_check_lease_seconds": 2,
}


class Lost(Exception):
    """The request got no answer (connection refused/reset, timeout): its outcome is UNKNOWN."""


class Anomaly(Exception):
    """The broker answered something the contract rules out."""


# -- the broker, killed and restarted ----------------------------------------------------------


class Supervisor:
    """Owns the broker processes (one, or several on one database).

    ``up[i]`` is clear from just before broker ``i`` is killed until its restart is
    ready; brokers are killed one at a time, so with several one is always up.
    """

    def __init__(self, brokers: list[BrokerProcess]) -> None:
        self.brokers = brokers
        self.up = [threading.Event() for _ in brokers]
        for event in self.up:
            event.set()
        self.kills = 0
        self.restart_seconds: list[float] = []

    def kill_and_restart(self, index: int, down_seconds: float = 0.0) -> None:
        self.up[index].clear()
        self.brokers[index].kill()
        self.kills += 1
        time.sleep(down_seconds)
        started = time.monotonic()
        self.brokers[index].start(timeout=60)
        self.restart_seconds.append(time.monotonic() - started)
        self.up[index].set()

    def choose(self, preferred: int) -> int:
        """The preferred broker if it is up, else another one that is (waiting for one if need be)."""
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            order = [preferred] + [i for i in range(len(self.brokers)) if i != preferred]
            for index in order:
                if self.up[index].is_set():
                    return index
            self.up[preferred].wait(0.05)
        raise TimeoutError("no broker came back")

    def wait_up(self, timeout: float = 90) -> None:
        self.choose(0)


# -- what the producers know ---------------------------------------------------------------------


@dataclass
class Ledger:
    """The producers' own record of intents, acknowledgements and UNKNOWN outcomes."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    # value id -> 1 (must be read exactly once) or 0 (must never be read_committed)
    expected: dict[str, int] = field(default_factory=dict)
    # value id -> (topic, partition, offset) the broker acknowledged
    located: dict[str, tuple[str, int, int]] = field(default_factory=dict)
    # half transaction_id -> "COMMIT" / "ROLLBACK": what the listener answers
    half_intent: dict[str, str] = field(default_factory=dict)
    # half message_id -> expected final state
    half_final: dict[str, str] = field(default_factory=dict)
    # mode-2 txn_id -> True (must be COMMITTED) / False (ABORTED or TIMED_OUT)
    txn_final: dict[str, bool] = field(default_factory=dict)
    # group -> {(topic, partition): offset} the group must end with
    group_model: dict[str, dict[tuple[str, int], int]] = field(default_factory=lambda: defaultdict(dict))
    outcomes: Counter[str] = field(default_factory=Counter)
    anomalies: list[str] = field(default_factory=list)
    server_errors: list[str] = field(default_factory=list)
    checks: Counter[str] = field(default_factory=Counter)

    def expect(self, ids: list[str], count: int) -> None:
        with self.lock:
            for value_id in ids:
                self.expected[value_id] = count

    def count(self, outcome: str, n: int = 1) -> None:
        with self.lock:
            self.outcomes[outcome] += n

    def anomaly(self, text: str) -> None:
        with self.lock:
            self.anomalies.append(text)


# -- the listener the checker calls ----------------------------------------------------------------


class ListenerServer:
    """A real HTTP callback server answering back-checks from the ledger's half intents."""

    def __init__(self, ledger: Ledger, seed: int, unknown_rate: float = 0.2) -> None:
        self.ledger = ledger
        rng = random.Random(seed)
        rng_lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # http.server's naming
                length = int(self.headers.get("content-length", 0))
                body = self.rfile.read(length)
                if len(body) < length:  # the broker was killed while sending it
                    with ledger.lock:
                        ledger.checks["cut_off"] += 1
                    return
                try:
                    check = json.loads(body)
                    txn = check["transaction_id"]
                except (ValueError, KeyError, TypeError):
                    ledger.anomaly(f"back-check with an unreadable body: {body[:200]!r}")
                    txn = None
                with ledger.lock:
                    intent = ledger.half_intent.get(txn) if txn else None
                    ledger.checks["received"] += 1
                with rng_lock:
                    unsure = rng.random() < unknown_rate
                if intent is None:
                    if txn is not None:
                        ledger.anomaly(f"back-check for a transaction no producer prepared: {check}")
                    state = "UNKNOWN"
                elif unsure:
                    state = "UNKNOWN"
                else:
                    state = intent
                with ledger.lock:
                    ledger.checks[state] += 1
                answer = json.dumps({"state": state}).encode()
                try:
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(answer)))
                    self.end_headers()
                    self.wfile.write(answer)
                except OSError:  # the broker was killed while it waited for the answer
                    with ledger.lock:
                        ledger.checks["answer_lost"] += 1

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name="chaos-listener", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/check"

    def start(self) -> None:
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


class CheckPoller:
    """A producer that cannot take calls: long-polls its group's checks and answers them."""

    def __init__(self, supervisor: Supervisor, ledger: Ledger, seed: int, unknown_rate: float = 0.2) -> None:
        self.api = Api(supervisor, ledger, home=1)
        self.ledger = ledger
        self.rng = random.Random(seed)
        self.unknown_rate = unknown_rate
        self.error: BaseException | None = None

    def run(self, stop: threading.Event) -> None:
        try:
            while not stop.is_set():
                answer = self.api.until_answered(
                    "GET", f"/v1/producer-groups/{POLLING_GROUP}/checks", params={"max_wait_ms": 300, "instance_id": "poller-1"}
                )
                if answer.status_code != 200:
                    raise Anomaly(f"poll for checks -> {answer.status_code} {answer.text}")
                for check in answer.json()["checks"]:
                    self.answer(check)
        except BaseException as error:  # noqa: BLE001 - reported by the test
            self.error = error
            self.ledger.anomaly(f"check poller stopped: {type(error).__name__}: {error}")
        finally:
            self.api.close()

    def answer(self, check: dict[str, Any]) -> None:
        with self.ledger.lock:
            intent = self.ledger.half_intent.get(check.get("transaction_id", ""))
            self.ledger.checks["polled"] += 1
        if intent is None:
            self.ledger.anomaly(f"polled check for a transaction no producer prepared: {check}")
            return
        if self.rng.random() < self.unknown_rate:
            with self.ledger.lock:
                self.ledger.checks["polled_unanswered"] += 1
            return  # UNKNOWN: offered again once the poll lease runs out
        action = "commit" if intent == "COMMIT" else "rollback"
        answer = self.api.until_answered("POST", f"/v1/half-messages/{check['message_id']}/{action}")
        want = "COMMITTED" if intent == "COMMIT" else "ROLLED_BACK"
        if answer.status_code != 200 or answer.json()["state"] != want:
            self.ledger.anomaly(
                f"answering polled check {check['message_id']} with {action} -> {answer.status_code} {answer.text}"
            )
        with self.ledger.lock:
            self.ledger.checks[f"polled_{intent}"] += 1


# -- one producer ---------------------------------------------------------------------------------


class Api:
    """One client's HTTP connections; a request without an answer raises :class:`Lost`.

    With several brokers a client has a home broker and goes to another one while
    its home is down, as behind a load balancer.
    """

    def __init__(self, supervisor: Supervisor, ledger: Ledger, home: int = 0) -> None:
        self.clients = [httpx.Client(base_url=b.url, timeout=20) for b in supervisor.brokers]
        self.supervisor = supervisor
        self.ledger = ledger
        self.home = home % len(self.clients)

    def close(self) -> None:
        for client in self.clients:
            client.close()

    def call(self, method: str, path: str, body: Any = None, params: dict[str, Any] | None = None) -> httpx.Response:
        try:
            response = self.clients[self.supervisor.choose(self.home)].request(method, path, json=body, params=params)
        except httpx.TransportError as error:
            raise Lost(f"{method} {path}: {type(error).__name__}") from error
        if response.status_code >= 500:
            with self.ledger.lock:
                self.ledger.server_errors.append(
                    f"{method} {path} {json.dumps(body)[:300]} -> {response.status_code} {response.text[:300]}"
                )
            if response.status_code == 503:
                self.ledger.count("answered_503")
                raise Lost(f"{method} {path}: 503")  # storage unavailable: retry like a lost answer
            raise Anomaly(f"{method} {path} -> {response.status_code} {response.text[:300]}")
        return response

    def until_answered(self, method: str, path: str, body: Any = None, params: dict[str, Any] | None = None) -> httpx.Response:
        """Repeat an idempotent request until the broker answers it (across restarts)."""
        deadline = time.monotonic() + 120
        while True:
            try:
                return self.call(method, path, body, params)
            except Lost:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)


def error_code(response: httpx.Response) -> str:
    try:
        return str(response.json()["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return f"HTTP_{response.status_code}"


class Worker:
    """One producer thread doing a random mix of operations and keeping the ledger."""

    def __init__(self, index: int, supervisor: Supervisor, ledger: Ledger, seed: int) -> None:
        self.index = index
        self.name = f"w{index}"
        self.api = Api(supervisor, ledger, home=index)
        self.ledger = ledger
        self.rng = random.Random(seed)
        self.counter = 0
        self.producer: tuple[int, int] | None = None
        self.sequences: dict[int, int] = defaultdict(int)
        self.txn_producer: tuple[int, int] | None = None
        self.txn_sequences: dict[tuple[str, int], int] = defaultdict(int)
        self.txn_group = f"txn-group-{self.name}"
        self.plain_group = f"plain-group-{self.name}"
        self.error: BaseException | None = None

    def next_id(self, kind: str) -> str:
        self.counter += 1
        return f"{self.name}-{kind}{self.counter}"

    # -- the loop ----------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        operations: list[tuple[Callable[[], None], int]] = [
            (self.idempotent_produce, 30),
            (lambda: self.half_message("COMMIT", forget=False), 14),
            (lambda: self.half_message("ROLLBACK", forget=False), 8),
            (lambda: self.half_message(self.rng.choice(["COMMIT", "ROLLBACK"]), forget=True), 10),
            (self.transactional_producer_txn, 20),
            (self.pulsar_txn, 12),
            (self.plain_group_commit, 6),
        ]
        functions = [f for f, _ in operations]
        weights = [w for _, w in operations]
        try:
            while not stop.is_set():
                self.rng.choices(functions, weights)[0]()
                self.ledger.count("operations")
        except BaseException as error:  # noqa: BLE001 - reported by the test
            self.error = error
            self.ledger.anomaly(f"{self.name} stopped: {type(error).__name__}: {error}")
        finally:
            self.api.close()

    # -- plain produce, idempotent ------------------------------------------------------------

    def idempotent_produce(self) -> None:
        if self.producer is None:
            answer = self.api.until_answered("POST", "/v1/producers", {})
            self.producer = (answer.json()["producer_id"], answer.json()["producer_epoch"])
        partition = self.rng.randrange(PARTITIONS)
        ids = [self.next_id("p") for _ in range(self.rng.randint(1, 3))]
        body = {
            "messages": [{"key": i, "value": {"id": i}} for i in ids],
            "producer_id": self.producer[0],
            "producer_epoch": self.producer[1],
            "base_sequence": self.sequences[partition],
        }
        path = f"/v1/topics/{TOPIC}/partitions/{partition}/messages"
        try:
            answer = self.api.call("POST", path, body)
            outcome = "produce_acked"
        except Lost:
            answer = self.api.until_answered("POST", path, body)
            outcome = "produce_unknown_retried"
        if answer.status_code != 200:
            raise Anomaly(f"idempotent produce {body} -> {answer.status_code} {answer.text}")
        result = answer.json()
        if result.get("duplicate"):
            outcome += "_duplicate"
        self.ledger.count(outcome)
        self.sequences[partition] += len(ids)
        self.ledger.expect(ids, 1)
        with self.ledger.lock:
            for value_id, placed in zip(ids, result["offsets"], strict=True):
                self.ledger.located[value_id] = (TOPIC, placed["partition"], placed["offset"])

    # -- mode 1: half messages -------------------------------------------------------------------

    def half_message(self, intent: str, *, forget: bool) -> None:
        txn = self.next_id("h")
        with self.ledger.lock:
            self.ledger.half_intent[txn] = intent  # known before the broker can ask
        body: dict[str, Any] = {
            "topic": TOPIC,
            "producer_group": self.rng.choice([PRODUCER_GROUP, POLLING_GROUP]),
            "transaction_id": txn,
            "key": txn,
            "value": {"id": txn},
        }
        try:
            answer = self.api.call("POST", "/v1/half-messages", body)
        except Lost:
            answer = self.api.until_answered("POST", "/v1/half-messages", body)
            self.ledger.count(f"half_prepare_unknown_retried_{answer.status_code}")
        if answer.status_code not in (200, 201):
            raise Anomaly(f"prepare {body} -> {answer.status_code} {answer.text}")
        message_id = answer.json()["message_id"]
        if answer.json()["transaction_id"] != txn:
            raise Anomaly(f"prepare of {txn} answered for transaction {answer.json()['transaction_id']}")
        final = "COMMITTED" if intent == "COMMIT" else "ROLLED_BACK"
        with self.ledger.lock:
            self.ledger.half_final[message_id] = final
        self.ledger.expect([txn], 1 if intent == "COMMIT" else 0)
        if forget:
            self.ledger.count(f"half_forgotten_{intent.lower()}")
            return
        action = "commit" if intent == "COMMIT" else "rollback"
        path = f"/v1/half-messages/{message_id}/{action}"
        try:
            answer = self.api.call("POST", path)
            outcome = f"half_{action}_acked"
        except Lost:
            answer = self.api.until_answered("POST", path)
            outcome = f"half_{action}_unknown_retried"
        if answer.status_code != 200 or answer.json()["state"] != final:
            raise Anomaly(f"{action} of half {message_id} ({txn}) -> {answer.status_code} {answer.text}")
        self.ledger.count(outcome)
        if intent == "COMMIT":
            placed = answer.json()
            with self.ledger.lock:
                self.ledger.located[txn] = (placed["topic"], placed["partition"], placed["offset"])

    # -- mode 2 with a transactional producer (Kafka style) -------------------------------------------

    def init_transactional_producer(self) -> None:
        answer = self.api.until_answered("POST", "/v1/producers", {"transactional_id": f"chaos-{self.name}"})
        if answer.status_code != 200:
            raise Anomaly(f"InitProducerId -> {answer.status_code} {answer.text}")
        self.txn_producer = (answer.json()["producer_id"], answer.json()["producer_epoch"])
        self.txn_sequences.clear()

    def transactional_producer_txn(self) -> None:
        if self.txn_producer is None:
            self.init_transactional_producer()
        assert self.txn_producer is not None
        pid, epoch = self.txn_producer
        try:
            answer = self.api.call("POST", "/v1/transactions", {"producer_id": pid, "producer_epoch": epoch, "timeout_ms": 30000})
        except Lost:
            # A transaction may or may not exist: a new epoch aborts whatever the old one left open.
            self.ledger.count("txn_begin_unknown_reinit")
            self.api.supervisor.wait_up()
            self.init_transactional_producer()
            return
        if answer.status_code != 201:
            self.ledger.count(f"txn_begin_refused_{error_code(answer)}")
            self.init_transactional_producer()
            return
        txn_id = answer.json()["txn_id"]
        ids: list[str] = []
        offsets_staged: dict[tuple[str, int], int] = {}
        for _ in range(self.rng.randint(1, 3)):
            topic, partition = TOPIC, self.rng.randrange(PARTITIONS)
            batch = [self.next_id("k") for _ in range(self.rng.randint(1, 3))]
            body = {
                "messages": [{"key": i, "value": {"id": i}} for i in batch],
                "producer_id": pid,
                "producer_epoch": epoch,
                "base_sequence": self.txn_sequences[(topic, partition)],
                "txn_id": txn_id,
            }
            ids += batch
            answer = self.api.until_answered("POST", f"/v1/topics/{topic}/partitions/{partition}/messages", body)
            if answer.status_code != 200:
                # The transaction is gone (timed out / fenced while the broker was down): all of it aborted.
                self.ledger.count(f"txn_produce_refused_{error_code(answer)}")
                self.settle_txn(txn_id, ids, commit_wanted=False, offsets=None)
                self.init_transactional_producer()
                return
            self.txn_sequences[(topic, partition)] += len(batch)
            with self.ledger.lock:
                for value_id, placed in zip(batch, answer.json()["offsets"], strict=True):
                    self.ledger.located[value_id] = (topic, placed["partition"], placed["offset"])
        if self.rng.random() < 0.6:
            # consume-transform-produce: read from the group's offset, write a summary, stage the offset.
            partition = self.rng.randrange(PARTITIONS)
            start = self.ledger.group_model[self.txn_group].get((TOPIC, partition), 0)
            read = self.api.until_answered(
                "GET", f"/v1/topics/{TOPIC}/partitions/{partition}/messages", params={"offset": start, "max_messages": 5}
            )
            if read.status_code != 200:
                raise Anomaly(f"read of {TOPIC}/{partition} at the group's offset {start} -> {read.status_code} {read.text}")
            next_offset = read.json()["next_offset"]
            out_id = self.next_id("t")
            out_partition = self.rng.randrange(OUT_PARTITIONS)
            body = {
                "messages": [{"key": out_id, "value": {"id": out_id, "read": len(read.json()["messages"])}}],
                "producer_id": pid,
                "producer_epoch": epoch,
                "base_sequence": self.txn_sequences[(OUT_TOPIC, out_partition)],
                "txn_id": txn_id,
            }
            ids.append(out_id)
            answer = self.api.until_answered("POST", f"/v1/topics/{OUT_TOPIC}/partitions/{out_partition}/messages", body)
            if answer.status_code != 200:
                self.ledger.count(f"txn_produce_refused_{error_code(answer)}")
                self.settle_txn(txn_id, ids, commit_wanted=False, offsets=None)
                self.init_transactional_producer()
                return
            self.txn_sequences[(OUT_TOPIC, out_partition)] += 1
            with self.ledger.lock:
                self.ledger.located[out_id] = (OUT_TOPIC, out_partition, answer.json()["offsets"][0]["offset"])
            staged = {"group": self.txn_group, "offsets": [{"topic": TOPIC, "partition": partition, "offset": next_offset}]}
            answer = self.api.until_answered("POST", f"/v1/transactions/{txn_id}/offsets", staged)
            if answer.status_code != 200:
                self.ledger.count(f"txn_offsets_refused_{error_code(answer)}")
                self.settle_txn(txn_id, ids, commit_wanted=False, offsets=None)
                self.init_transactional_producer()
                return
            offsets_staged[(TOPIC, partition)] = next_offset
        committed = self.settle_txn(txn_id, ids, commit_wanted=self.rng.random() < 0.75, offsets=offsets_staged)
        if not committed:
            # A fenced or timed-out producer needs a new epoch; an ordinary abort does not, but it is harmless.
            self.init_transactional_producer()

    # -- mode 2 without a producer (Pulsar style) -----------------------------------------------------

    def pulsar_txn(self) -> None:
        forget = self.rng.random() < 0.15
        try:
            answer = self.api.call("POST", "/v1/transactions", {"timeout_ms": 1500 if forget else 30000})
        except Lost:
            self.ledger.count("txn_begin_unknown_abandoned")  # nothing was written to it; it times out
            return
        if answer.status_code != 201:
            raise Anomaly(f"begin -> {answer.status_code} {answer.text}")
        txn_id = answer.json()["txn_id"]
        ids: list[str] = []
        for _ in range(self.rng.randint(1, 3)):
            partition = self.rng.randrange(PARTITIONS)
            batch = [self.next_id("s") for _ in range(self.rng.randint(1, 3))]
            ids += batch
            body = {"messages": [{"key": i, "value": {"id": i}} for i in batch], "txn_id": txn_id}
            try:
                answer = self.api.call("POST", f"/v1/topics/{TOPIC}/partitions/{partition}/messages", body)
            except Lost:
                # No sequence to retry with: abort, so whatever was written stays invisible.
                self.ledger.count("txn_produce_unknown_abort")
                self.settle_txn(txn_id, ids, commit_wanted=False, offsets=None)
                return
            if answer.status_code != 200:
                self.ledger.count(f"txn_produce_refused_{error_code(answer)}")
                self.settle_txn(txn_id, ids, commit_wanted=False, offsets=None)
                return
            with self.ledger.lock:
                for value_id, placed in zip(batch, answer.json()["offsets"], strict=True):
                    self.ledger.located[value_id] = (TOPIC, placed["partition"], placed["offset"])
        if forget:
            self.ledger.count("txn_forgotten")
            self.ledger.expect(ids, 0)
            with self.ledger.lock:
                self.ledger.txn_final[txn_id] = False
            return
        self.settle_txn(txn_id, ids, commit_wanted=self.rng.random() < 0.7, offsets=None)

    # -- ending a mode-2 transaction, UNKNOWN outcomes included ----------------------------------------

    def settle_txn(
        self, txn_id: str, ids: list[str], *, commit_wanted: bool, offsets: dict[tuple[str, int], int] | None
    ) -> bool:
        """End the transaction as wanted, find out how it really ended, and record it. True if committed."""
        action = "commit" if commit_wanted else "abort"
        path = f"/v1/transactions/{txn_id}/{action}"
        try:
            answer = self.api.call("POST", path)
            state = answer.json()["state"] if answer.status_code == 200 else None
            outcome = f"txn_{action}_acked" if state else f"txn_{action}_refused_{error_code(answer)}"
        except Lost:
            state = self.txn_state_after_loss(txn_id, commit_wanted)
            outcome = f"txn_{action}_unknown_{state}"
        if state is None:
            # Refused: find out what it is (timed out while the broker was down, or fenced).
            described = self.api.until_answered("GET", f"/v1/transactions/{txn_id}")
            state = described.json()["state"]
        if commit_wanted and state == "PREPARE_COMMIT":
            state = self.wait_final(txn_id)
        committed = state == "COMMITTED"
        if committed and not commit_wanted:
            self.ledger.anomaly(f"transaction {txn_id} was aborted by its producer but ended {state}")
        if state not in ("COMMITTED", "ABORTED", "TIMED_OUT", "PREPARE_ABORT"):
            self.ledger.anomaly(f"transaction {txn_id}: {action} left it {state}")
        self.ledger.count(outcome)
        self.ledger.count("txn_committed" if committed else "txn_aborted")
        self.ledger.expect(ids, 1 if committed else 0)
        with self.ledger.lock:
            self.ledger.txn_final[txn_id] = committed
            if committed and offsets:
                self.ledger.group_model[self.txn_group].update(offsets)
        return committed

    def txn_state_after_loss(self, txn_id: str, commit_wanted: bool) -> str:
        """A commit / abort whose answer was lost: ask for the transaction, finish what is unfinished."""
        action = "commit" if commit_wanted else "abort"
        while True:
            state = self.api.until_answered("GET", f"/v1/transactions/{txn_id}").json()["state"]
            if state == "OPEN":
                answer = self.api.until_answered("POST", f"/v1/transactions/{txn_id}/{action}")
                if answer.status_code == 200:
                    return str(answer.json()["state"])
                continue  # refused meanwhile (timed out): look again
            return str(state)

    def wait_final(self, txn_id: str) -> str:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            state = str(self.api.until_answered("GET", f"/v1/transactions/{txn_id}").json()["state"])
            if state not in ("PREPARE_COMMIT", "PREPARE_ABORT"):
                return state
            time.sleep(0.1)
        self.ledger.anomaly(f"transaction {txn_id} stayed prepared for 30 s")
        return "PREPARE_COMMIT"

    # -- plain group offsets ------------------------------------------------------------------------

    def plain_group_commit(self) -> None:
        partition = self.rng.randrange(PARTITIONS)
        described = self.api.until_answered("GET", f"/v1/topics/{TOPIC}")
        high_watermark = described.json()["partitions"][partition]["high_watermark"]
        offset = self.rng.randint(0, high_watermark)
        body = {"offsets": [{"topic": TOPIC, "partition": partition, "offset": offset}]}
        answer = self.api.until_answered("POST", f"/v1/groups/{self.plain_group}/offsets", body)
        if answer.status_code != 200:
            raise Anomaly(f"group commit {body} -> {answer.status_code} {answer.text}")
        with self.ledger.lock:
            self.ledger.group_model[self.plain_group][(TOPIC, partition)] = offset
        self.ledger.count("group_commit")


# -- the run -----------------------------------------------------------------------------------


@dataclass
class ChaosReport:
    kills: int
    seconds: float
    outcomes: Counter[str]
    checks: Counter[str]
    committed: int
    invisible: int
    restart_seconds: list[float]
    failures: list[str]

    def figures(self) -> str:
        lines = [
            f"kills={self.kills} seconds={self.seconds:.1f} operations={self.outcomes['operations']}"
            f" committed_values={self.committed} invisible_values={self.invisible}"
            f" restart_avg={sum(self.restart_seconds) / max(1, len(self.restart_seconds)):.2f}s",
            "outcomes: " + ", ".join(f"{k}={v}" for k, v in sorted(self.outcomes.items())),
            "back-checks: " + ", ".join(f"{k}={v}" for k, v in sorted(self.checks.items())),
        ]
        return "\n".join(lines)


def run_chaos(
    brokers: BrokerProcess | list[BrokerProcess],
    *,
    kills: int,
    workers: int = 4,
    uptime: tuple[float, float] = (2.0, 4.0),
    seed: int = 0,
) -> ChaosReport:
    """Run the workload, kill and restart a broker ``kills`` times, then verify; returns the report.

    With several brokers (on one database) they are killed in turn, one at a time.
    """
    brokers = brokers if isinstance(brokers, list) else [brokers]
    started = time.monotonic()
    rng = random.Random(seed)
    ledger = Ledger()
    supervisor = Supervisor(brokers)
    listener = ListenerServer(ledger, seed)
    listener.start()
    admin = Api(supervisor, ledger)
    stop = threading.Event()
    poller_stop = threading.Event()
    poller_thread: threading.Thread | None = None
    threads: list[threading.Thread] = []
    pool: list[Worker] = []
    try:
        for name, count in ((TOPIC, PARTITIONS), (OUT_TOPIC, OUT_PARTITIONS)):
            answer = admin.until_answered("POST", "/v1/topics", {"name": name, "partitions": count})
            assert answer.status_code == 201, answer.text
        register = {"callback_url": listener.url, "ttl_seconds": 60}
        answer = admin.until_answered("PUT", f"/v1/producer-groups/{PRODUCER_GROUP}/listeners/chaos-1", register)
        assert answer.status_code == 200, answer.text

        for index in range(workers):
            worker = Worker(index, supervisor, ledger, seed * 1000 + index)
            pool.append(worker)
            thread = threading.Thread(target=worker.run, args=(stop,), name=f"chaos-{worker.name}", daemon=True)
            threads.append(thread)
            thread.start()

        poller = CheckPoller(supervisor, ledger, seed * 1000 + 999)
        poller_thread = threading.Thread(target=poller.run, args=(poller_stop,), name="chaos-poller", daemon=True)
        poller_thread.start()  # keeps answering while the end state settles

        last_heartbeat = time.monotonic()
        for kill in range(kills):
            time.sleep(rng.uniform(*uptime))
            supervisor.kill_and_restart(kill % len(brokers), down_seconds=rng.choice([0.0, 0.0, 0.3]))
            if time.monotonic() - last_heartbeat > 10:
                admin.until_answered("PUT", f"/v1/producer-groups/{PRODUCER_GROUP}/listeners/chaos-1", register)
                last_heartbeat = time.monotonic()
        time.sleep(rng.uniform(*uptime))  # some load on the last incarnation too
        stop.set()
        for thread in threads:
            thread.join(120)
        admin.until_answered("PUT", f"/v1/producer-groups/{PRODUCER_GROUP}/listeners/chaos-1", register)
        failures = verify(admin, ledger)
    finally:
        stop.set()
        poller_stop.set()
        if poller_thread is not None:
            threads.append(poller_thread)
        for thread in threads:
            thread.join(120)
        admin.close()
        listener.close()
    for thread in threads:
        if thread.is_alive():
            failures.append(f"{thread.name} did not stop")
    committed = sum(1 for v in ledger.expected.values() if v == 1)
    return ChaosReport(
        kills=supervisor.kills,
        seconds=time.monotonic() - started,
        outcomes=ledger.outcomes,
        checks=ledger.checks,
        committed=committed,
        invisible=len(ledger.expected) - committed,
        restart_seconds=supervisor.restart_seconds,
        failures=failures,
    )


# -- verification ---------------------------------------------------------------------------------


def read_all(admin: Api, topic: str, partitions: int, isolation: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for partition in range(partitions):
        offset = 0
        while True:
            answer = admin.until_answered(
                "GET",
                f"/v1/topics/{topic}/partitions/{partition}/messages",
                params={"offset": offset, "max_messages": 1000, "isolation": isolation},
            )
            assert answer.status_code == 200, answer.text
            page = answer.json()
            found += page["messages"]
            end = page["last_stable_offset"] if isolation == "read_committed" else page["high_watermark"]
            if page["next_offset"] >= end:
                break
            if page["next_offset"] <= offset:
                raise Anomaly(f"{topic}/{partition}: next_offset {page['next_offset']} does not advance from {offset}")
            offset = page["next_offset"]
    return found


def wait_settled(admin: Api, timeout: float = 45) -> list[str]:
    """Wait until no half message is PREPARED and no transaction holds a partition's LSO."""
    deadline = time.monotonic() + timeout
    while True:
        pending = admin.until_answered("GET", "/v1/half-messages", params={"state": "PREPARED", "limit": 10000}).json()[
            "half_messages"
        ]
        held = [
            f"{topic}/{p['partition']} lso={p['last_stable_offset']} hw={p['high_watermark']}"
            for topic in (TOPIC, OUT_TOPIC)
            for p in admin.until_answered("GET", f"/v1/topics/{topic}").json()["partitions"]
            if p["last_stable_offset"] != p["high_watermark"]
        ]
        if not pending and not held:
            return []
        if time.monotonic() > deadline:
            problems = [f"half message left unresolved: {h}" for h in pending[:20]]
            problems += [f"last stable offset still held back: {h}" for h in held]
            return problems
        time.sleep(0.25)


def verify(admin: Api, ledger: Ledger) -> list[str]:
    failures = list(ledger.anomalies)
    failures += [f"server error: {e}" for e in ledger.server_errors if " -> 503 " not in e]
    failures += wait_settled(admin)

    committed_reads: Counter[str] = Counter()
    where: dict[str, list[tuple[str, int, int]]] = defaultdict(list)
    uncommitted_reads: Counter[str] = Counter()
    for topic, count in ((TOPIC, PARTITIONS), (OUT_TOPIC, OUT_PARTITIONS)):
        for message in read_all(admin, topic, count, "read_committed"):
            value_id = message["value"]["id"]
            committed_reads[value_id] += 1
            where[value_id].append((message["topic"], message["partition"], message["offset"]))
        for message in read_all(admin, topic, count, "read_uncommitted"):
            uncommitted_reads[message["value"]["id"]] += 1

    with ledger.lock:
        expected = dict(ledger.expected)
        located = dict(ledger.located)
    for value_id, want in sorted(expected.items()):
        got = committed_reads.get(value_id, 0)
        if want == 1 and got != 1:
            failures.append(f"committed value {value_id} read {got} times (acknowledged at {located.get(value_id)})")
        elif want == 0 and got:
            failures.append(f"rolled back / aborted value {value_id} visible to read_committed {got} times at {where[value_id]}")
        elif want == 1 and value_id in located and where[value_id][0] != located[value_id]:
            failures.append(f"value {value_id} acknowledged at {located[value_id]} but read at {where[value_id][0]}")
    for value_id in sorted(set(committed_reads) - set(expected)):
        failures.append(f"value {value_id} read {committed_reads[value_id]} times but no producer finished writing it")
    for value_id, count in sorted(uncommitted_reads.items()):
        if count > 1:
            failures.append(f"value {value_id} written {count} times (read_uncommitted): a retry was not deduplicated")

    # Half messages: each ended as its producer meant, none left PREPARED or DISCARDED.
    with ledger.lock:
        half_final = dict(ledger.half_final)
        txn_final = dict(ledger.txn_final)
        groups = {g: dict(m) for g, m in ledger.group_model.items()}
    for message_id, want_state in sorted(half_final.items()):
        state = admin.until_answered("GET", f"/v1/half-messages/{message_id}").json().get("state")
        if state != want_state:
            failures.append(f"half message {message_id} is {state}, its producer meant {want_state}")
    for txn_id, committed in sorted(txn_final.items()):
        answer = admin.until_answered("GET", f"/v1/transactions/{txn_id}")
        state = answer.json().get("state") if answer.status_code == 200 else error_code(answer)
        allowed = {"COMMITTED"} if committed else {"ABORTED", "TIMED_OUT"}
        if state not in allowed:
            failures.append(f"transaction {txn_id} is {state}, expected one of {sorted(allowed)}")

    # Group offsets: what the producers committed, and never ahead of the data.
    bounds = {
        (topic, p["partition"]): (p["high_watermark"], p["last_stable_offset"])
        for topic in (TOPIC, OUT_TOPIC)
        for p in admin.until_answered("GET", f"/v1/topics/{topic}").json()["partitions"]
    }
    for group, model in sorted(groups.items()):
        stored = {
            (o["topic"], o["partition"]): o["offset"]
            for o in admin.until_answered("GET", f"/v1/groups/{group}/offsets").json()["offsets"]
        }
        if stored != model:
            failures.append(f"group {group} has offsets {sorted(stored.items())}, its producer committed {sorted(model.items())}")
        for key, offset in stored.items():
            high_watermark, _ = bounds[key]
            if offset > high_watermark:
                failures.append(f"group {group} offset {offset} on {key} is ahead of the high watermark {high_watermark}")
    return failures
