"""The official RocketMQ 5 Python client, driven over stdin/stdout by the RocketMQ end-to-end tests.

Run as ``python -m tests.support.rocketmq_worker ENDPOINT TOPICS [ACCESS_KEY SECRET_KEY]``
in a process of its own: the client imports OpenTelemetry and rewrites the logging
configuration of whatever process imports it. One JSON command per input line, one JSON
answer per output line (``{"error": ...}`` when the client raised). The producer's
transaction checker answers what the message's user property ``answer`` says (COMMIT,
ROLLBACK, anything else: UNSPECIFIED) and remembers which messages it was asked about.
"""

from __future__ import annotations

import base64
import json
import sys
import threading
import time
from typing import Any

from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    Message,
    MessageListener,
    Producer,
    PushConsumer,
    SimpleConsumer,
    TransactionChecker,
    TransactionResolution,
)

RESOLUTIONS = {"COMMIT": TransactionResolution.COMMIT, "ROLLBACK": TransactionResolution.ROLLBACK}


class AnswerFromProperty(TransactionChecker):
    def __init__(self) -> None:
        self.asked: list[str] = []

    def check(self, message: Any) -> Any:
        self.asked.append(message.message_id)
        answer = message.properties.get("answer", "")
        return RESOLUTIONS.get(answer, TransactionResolution.TRANSACTION_RESOLUTION_UNSPECIFIED)


class Collecting(MessageListener):
    """A PushConsumer's listener: fails a message as often as its ``fail`` property says."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def consume(self, message: Any) -> Any:
        with self.lock:
            self.seen.append(described(message))
        if message.delivery_attempt <= int(message.properties.get("fail", "0")):
            return ConsumeResult.FAILURE
        return ConsumeResult.SUCCESS


def described(message: Any) -> dict[str, Any]:
    body: bytes = message.body
    try:
        text: str | None = body.decode()
    except UnicodeDecodeError:
        text = None
    return {
        "message_id": message.message_id,
        "topic": message.topic,
        "body": text,
        "body_base64": base64.b64encode(body).decode(),
        "tag": message.tag,
        "keys": sorted(message.keys or []),
        "properties": dict(message.properties or {}),
        "delivery_attempt": message.delivery_attempt,
        "message_group": message.message_group,
        "corrupted": bool(getattr(message, "corrupted", False)),
    }


class Worker:
    def __init__(self, endpoint: str, topics: list[str], credentials: Credentials) -> None:
        self.config = ClientConfiguration(endpoint, credentials)
        self.checker = AnswerFromProperty()
        self.producer = Producer(self.config, tuple(topics), self.checker)
        self.producer.startup()
        self.consumers: dict[tuple[str, str, str], Any] = {}
        self.pushers: dict[str, tuple[Any, Collecting]] = {}

    def message(self, command: dict[str, Any]) -> Any:
        message = Message()
        message.topic = command["topic"]
        message.body = base64.b64decode(command["body_base64"]) if "body_base64" in command else command["body"].encode()
        if command.get("tag"):
            message.tag = command["tag"]
        for key in command.get("keys", ()):
            message.keys = key  # the setter adds one key per assignment
        for name, value in command.get("properties", {}).items():
            message.add_property(name, value)
        if command.get("group"):
            message.message_group = command["group"]
        if command.get("delivery_ms"):
            message.delivery_timestamp = command["delivery_ms"]  # 5.1.2 puts it in Timestamp.seconds as given
        return message

    def send(self, command: dict[str, Any]) -> dict[str, Any]:
        receipt = self.producer.send(self.message(command))
        return {"message_id": receipt.message_id}

    def transaction(self, command: dict[str, Any]) -> dict[str, Any]:
        transaction = self.producer.begin_transaction()
        receipt = self.producer.send(self.message(command), transaction)
        if command["action"] == "commit":
            transaction.commit()
        elif command["action"] == "rollback":
            transaction.rollback()
        return {"message_id": receipt.message_id, "transaction_id": receipt.transaction_id}

    def consumer(self, group: str, topic: str, expression: str) -> Any:
        key = (group, topic, expression)
        if key not in self.consumers:
            consumer = SimpleConsumer(self.config, group, {topic: FilterExpression(expression)}, await_duration=2)
            consumer.startup()
            self.consumers[key] = consumer
        return self.consumers[key]

    def receive(self, command: dict[str, Any]) -> dict[str, Any]:
        """Receive until ``count`` messages came or ``timeout_s`` passed; ack them if ``ack``.

        A receive that fails (its broker went away) is tried again, as an application's
        receive loop does; the failures are counted in the answer.
        """
        consumer = self.consumer(command["group"], command["topic"], command.get("expression", "*"))
        found: list[dict[str, Any]] = []
        failures = 0
        deadline = time.monotonic() + command.get("timeout_s", 10)
        while len(found) < command.get("count", 1) and time.monotonic() < deadline:
            try:
                received = consumer.receive(command.get("max", 16), command.get("invisible_s", 15))
            except Exception:  # noqa: BLE001 - counted; the next receive goes to the route's next queue
                failures += 1
                time.sleep(0.2)
                continue
            for message in received:
                found.append(described(message))
                if command.get("ack", True):
                    consumer.ack(message)
        return {"messages": found, "failures": failures}

    def push(self, command: dict[str, Any]) -> dict[str, Any]:
        """Start a PushConsumer of a group (once), then what its listener has seen so far."""
        group = command["group"]
        if group not in self.pushers:
            listener = Collecting()
            consumer = PushConsumer(
                self.config, group, listener, {command["topic"]: FilterExpression(command.get("expression", "*"))}
            )
            consumer.startup()
            self.pushers[group] = (consumer, listener)
        _, listener = self.pushers[group]
        deadline = time.monotonic() + command.get("timeout_s", 0)
        while time.monotonic() < deadline and len(listener.seen) < command.get("count", 0):
            time.sleep(0.1)
        with listener.lock:
            return {"messages": list(listener.seen)}

    def transactions(self, command: dict[str, Any]) -> dict[str, Any]:
        """Chaos: ``count`` transactions, every third committed, rolled back or left to the back-check
        (which rolls it back); each outcome as the client saw it, failures (a killed broker) included."""
        kinds = (("c", "commit", "COMMIT"), ("r", "rollback", "ROLLBACK"), ("u", "none", "ROLLBACK"))
        done = []
        for n in range(command["count"]):
            kind, action, answer = kinds[n % 3]
            body = f"{command['prefix']}-{kind}-{n}"
            record: dict[str, Any] = {"body": body, "kind": kind, "ok": False}
            try:
                sent = self.transaction(
                    {"topic": command["topic"], "body": body, "action": action, "properties": {"answer": answer}}
                )
                record.update(sent, ok=True)
            except Exception as error:  # noqa: BLE001 - the broker was killed: the outcome is the check's
                record["error"] = f"{type(error).__name__}: {error}"[:200]
            done.append(record)
        return {"transactions": done}

    def drain(self, command: dict[str, Any]) -> dict[str, Any]:
        """Chaos: receive and ack until nothing came for ``idle_s`` (after ``min_s``), or ``deadline_s``;
        every delivery and whether its ack succeeded. Failed calls (a killed broker) are retried."""
        consumer = self.consumer(command["group"], command["topic"], "*")
        seen: list[dict[str, Any]] = []
        started = last = time.monotonic()
        while True:
            now = time.monotonic()
            if now - started > command["deadline_s"] or (now - started > command["min_s"] and now - last > command["idle_s"]):
                break
            try:
                received = consumer.receive(16, command.get("invisible_s", 5))
            except Exception:  # noqa: BLE001 - the broker is down: try again
                time.sleep(0.2)
                continue
            for message in received:
                last = time.monotonic()
                entry = {"message_id": message.message_id, "body": message.body.decode(), "acked": False}
                try:
                    consumer.ack(message)
                    entry["acked"] = True
                except Exception:  # noqa: BLE001 - its lock runs out and it comes back
                    pass
                seen.append(entry)
        return {"seen": seen}

    def checked(self, command: dict[str, Any]) -> dict[str, Any]:
        return {"asked": list(self.checker.asked)}

    def close(self) -> None:
        for consumer in self.consumers.values():
            consumer.shutdown()
        for consumer, _ in self.pushers.values():
            consumer.shutdown()
        self.producer.shutdown()


def main() -> int:
    endpoint, topics = sys.argv[1], sys.argv[2].split(",")
    credentials = Credentials(sys.argv[3], sys.argv[4]) if len(sys.argv) > 4 else Credentials()
    worker = Worker(endpoint, topics, credentials)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        if command["op"] == "close":
            break
        try:
            answer = getattr(worker, command["op"])(command)
        except Exception as error:  # noqa: BLE001 - the test reads what the client raised
            answer = {"error": f"{type(error).__name__}: {error}"}
        print(json.dumps(answer), flush=True)
    worker.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
