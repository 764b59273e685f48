"""Back-checking unresolved half messages by asking their producer group.

Each round reads the half messages that are due (their ``next_check_at`` has come;
resolved ones are excluded by the op-record index, so nothing resolved is ever
checked), claims each one (counting the check and pushing the next one out by a
check interval) and calls one live listener of its group, without waiting for the
calls to finish: a slow or dead group holds at most its own few in-flight slots
and never delays another group or the next round. Any failure of one check is
logged and counted as that check; it never stops the round.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import Counter
from dataclasses import dataclass

import httpx
import orjson

from app.errors import AlreadyResolved, BrokerError
from app.metrics import CHECKS
from app.settings import Settings
from checker.decisions import SIGNATURE_HEADER, check_payload, need_discard, parse_answer, signature
from half_store.records import HalfMessage, Listener
from half_store.service import CheckCandidate, HalfMessageService

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RoundReport:
    due: int
    checked: int
    discarded: int
    unanswerable: int


class BackChecker:
    def __init__(self, halves: HalfMessageService, settings: Settings, http: httpx.AsyncClient) -> None:
        self.halves = halves
        self.settings = settings
        self.http = http
        self.interval_ms = int(settings.check_interval_seconds * 1000)
        self.per_group_limit = max(1, settings.check_concurrency // 4)
        self._in_flight: dict[str, str] = {}  # message id -> producer group
        self._tasks: set[asyncio.Task[None]] = set()

    async def run_once(self, scan_limit: int = 1000) -> RoundReport:
        due = [h for h in await self.halves.due_for_check(scan_limit) if h.message_id not in self._in_flight]
        listeners = await self.halves.live_listeners(sorted({h.producer_group for h in due}))
        callbacks: dict[str, list[Listener]] = {}
        polled: set[str] = set()
        for listener in listeners:
            if listener.callback_url:
                callbacks.setdefault(listener.producer_group, []).append(listener)
            else:
                polled.add(listener.producer_group)
        checked = discarded = unanswerable = 0
        busy = Counter(self._in_flight.values())
        for half in due:
            if need_discard(half, self.settings.check_max):
                discarded += await self._discard(half)
            elif half.producer_group in callbacks:
                if len(self._in_flight) >= self.settings.check_concurrency or busy[half.producer_group] >= self.per_group_limit:
                    continue
                candidate = await self.halves.claim_check(half, self.interval_ms)
                if candidate is not None:
                    busy[half.producer_group] += 1
                    self._spawn(candidate, random.choice(callbacks[half.producer_group]))
                    checked += 1
            elif half.producer_group not in polled:
                # Nobody to ask: RocketMQ counts the check too, so the message is discarded in the end.
                if await self.halves.claim_check(half, self.interval_ms) is not None:
                    CHECKS.labels("no_listener").inc()
                    unanswerable += 1
        return RoundReport(len(due), checked, discarded, unanswerable)

    async def drain(self) -> None:
        """Wait for the checks in flight (tests, shutdown)."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await self.drain()

    def _spawn(self, candidate: CheckCandidate, listener: Listener) -> None:
        self._in_flight[candidate.half.message_id] = candidate.half.producer_group
        task = asyncio.create_task(self._check(candidate, listener))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _check(self, candidate: CheckCandidate, listener: Listener) -> None:
        half = candidate.half
        try:
            answer = await self._ask(candidate, listener)
            CHECKS.labels(answer.lower()).inc()
            if answer == "COMMIT":
                await self.halves.commit(half.message_id, resolved_by="checker")
            elif answer == "ROLLBACK":
                await self.halves.rollback(half.message_id, resolved_by="checker")
        except AlreadyResolved:
            pass  # the producer answered on its own meanwhile
        except (httpx.HTTPError, BrokerError, OSError) as error:
            CHECKS.labels("error").inc()
            log.info("check of %s via %s failed: %s", half.message_id, listener.instance_id, error)
        except Exception:  # noqa: BLE001 - one bad check must never stop the checker (RocketMQ #9500)
            CHECKS.labels("error").inc()
            log.exception("check of %s failed unexpectedly", half.message_id)
        finally:
            self._in_flight.pop(half.message_id, None)

    async def _ask(self, candidate: CheckCandidate, listener: Listener) -> str:
        assert listener.callback_url is not None
        body = orjson.dumps(check_payload(candidate))
        headers = {"content-type": "application/json"}
        if listener.secret:
            headers[SIGNATURE_HEADER] = signature(listener.secret, body)
        response = await self.http.post(
            listener.callback_url, content=body, headers=headers, timeout=self.settings.check_timeout_seconds
        )
        if response.status_code != 200:
            return "UNKNOWN"
        return parse_answer(response.content)

    async def _discard(self, half: HalfMessage) -> int:
        try:
            await self.halves.discard(half.message_id)
        except AlreadyResolved:
            return 0
        log.warning(
            "discarded half message %s of group %s after %d checks", half.message_id, half.producer_group, half.check_times
        )
        return 1
