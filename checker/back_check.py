"""Back-checking unresolved half messages by asking their producer group.

Each round reads the half messages that are due (their ``next_check_at`` has come;
resolved ones are excluded by the op-record index, so nothing resolved is ever
checked). It claims a bounded share of each group's due messages in one write,
which counts the check and pushes the next one out by a check interval. It then
hands them to call tasks without waiting for them. A call task takes a slot of its
group (a quarter of ``check_concurrency``) before a global slot, so a slow or dead
group holds at most its own few slots and never delays another group or the next
round. A failure of one check is logged and counted as that check; it never stops
the round.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import defaultdict
from dataclasses import dataclass

import httpx
import orjson

from half_store.domain.errors import AlreadyResolved, BrokerError, CallbackNotAllowed
from half_store.domain.half_records import CheckAnswer, HalfMessage, Listener
from half_store.metrics import CHECKS
from half_store.services.check_decisions import (
    SIGNATURE_HEADER,
    check_payload,
    need_discard,
    parse_answer,
    signature,
)
from half_store.services.half_messages import CheckCandidate, HalfMessageService
from half_store.settings import Settings

log = logging.getLogger(__name__)

# How many claimed checks a group may have queued behind its call slots.
QUEUE_PER_SLOT = 8
# A listener answers {"state": ...}; anything longer is not read past this.
MAX_ANSWER_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class RoundReport:
    due: int
    checked: int
    discarded: int
    unanswerable: int


def _fields(report: RoundReport) -> tuple[int, int, int, int]:
    return report.due, report.checked, report.discarded, report.unanswerable


class BackChecker:
    def __init__(self, halves: HalfMessageService, settings: Settings, http: httpx.AsyncClient) -> None:
        self.halves = halves
        self.settings = settings
        self.http = http
        self.interval_ms = int(settings.check_interval_seconds * 1000)
        self.per_group_limit = max(1, settings.check_concurrency // 4)
        self._calls = asyncio.Semaphore(settings.check_concurrency)
        self._group_slots: dict[str, asyncio.Semaphore] = defaultdict(lambda: asyncio.Semaphore(self.per_group_limit))
        self._in_flight: dict[str, str] = {}  # message id -> producer group
        self._tasks: set[asyncio.Task[None]] = set()

    async def run_once(self, scan_limit: int = 1000) -> RoundReport:
        """One walk over what is due; with a backlog it keeps claiming as calls finish, for up to an interval."""
        deadline = asyncio.get_running_loop().time() + self.settings.check_interval_seconds * 0.9
        total = RoundReport(0, 0, 0, 0)
        while True:
            report, saturated = await self._claim_and_dispatch(scan_limit)
            total = RoundReport(*(a + b for a, b in zip(_fields(total), _fields(report), strict=True)))
            if not saturated or asyncio.get_running_loop().time() >= deadline:
                return total
            await asyncio.sleep(0.02)  # let calls in flight finish and free their group's queue

    async def _claim_and_dispatch(self, scan_limit: int) -> tuple[RoundReport, bool]:
        due = [h for h in await self.halves.due_for_check(scan_limit) if h.message_id not in self._in_flight]
        listeners = await self.halves.live_listeners(sorted({h.producer_group for h in due}))
        callbacks: dict[str, list[Listener]] = defaultdict(list)
        polled: set[str] = set()
        for listener in listeners:
            if listener.callback_url:
                callbacks[listener.producer_group].append(listener)
            else:
                polled.add(listener.producer_group)
        queued = defaultdict(int, self._queued_by_group())
        saturated = False
        to_discard: list[HalfMessage] = []
        to_check: list[HalfMessage] = []
        unanswerable: list[HalfMessage] = []
        for half in due:
            group = half.producer_group
            if need_discard(half, self.settings.check_max):
                to_discard.append(half)
            elif group in callbacks:
                if queued[group] < self.per_group_limit * QUEUE_PER_SLOT:
                    queued[group] += 1
                    to_check.append(half)
                else:
                    saturated = True
            elif group not in polled:
                unanswerable.append(half)  # nobody to ask: counted anyway, as RocketMQ does
        chosen = {h.message_id: random.choice(callbacks[h.producer_group]) for h in to_check}
        asked: list[str | None] = [chosen[h.message_id].instance_id for h in to_check]
        for candidate in await self.halves.claim_checks(to_check, self.interval_ms, asked):
            self._spawn(candidate, chosen[candidate.half.message_id])
        # Nobody to ask: in the history as an ERROR check sent to no instance.
        uncounted = await self.halves.claim_checks(unanswerable, self.interval_ms, answer=CheckAnswer.ERROR)
        CHECKS.labels("no_listener").inc(len(uncounted))
        discarded = sum(await asyncio.gather(*(self._discard(h) for h in to_discard)))
        return RoundReport(len(due), len(to_check), discarded, len(uncounted)), saturated

    async def drain(self) -> None:
        """Wait for the checks in flight (tests, shutdown)."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await self.drain()

    def _queued_by_group(self) -> dict[str, int]:
        counts: dict[str, int] = defaultdict(int)
        for group in self._in_flight.values():
            counts[group] += 1
        return counts

    def _spawn(self, candidate: CheckCandidate, listener: Listener) -> None:
        self._in_flight[candidate.half.message_id] = candidate.half.producer_group
        task = asyncio.create_task(self._check(candidate, listener))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _check(self, candidate: CheckCandidate, listener: Listener) -> None:
        half = candidate.half
        try:
            async with self._group_slots[half.producer_group], self._calls:
                answer = await self._call(candidate, listener)
            if answer is CheckAnswer.COMMIT:
                await self.halves.commit(half.message_id, resolved_by="checker")
            elif answer is CheckAnswer.ROLLBACK:
                await self.halves.rollback(half.message_id, resolved_by="checker")
        except AlreadyResolved:
            pass  # the producer answered on its own meanwhile
        except (httpx.HTTPError, BrokerError, OSError) as error:
            CHECKS.labels("error").inc()
            log.info("check of %s via %s failed: %s", half.message_id, listener.instance_id, error)
        except Exception:  # one bad check must never stop the checker (RocketMQ #9500)
            CHECKS.labels("error").inc()
            log.exception("check of %s failed unexpectedly", half.message_id)
        finally:
            self._in_flight.pop(half.message_id, None)

    async def _call(self, candidate: CheckCandidate, listener: Listener) -> CheckAnswer:
        """Ask the listener, and write what came back (or why nothing did) into the check history."""
        started = time.monotonic()
        try:
            answer = await self._ask(candidate, listener)
        except httpx.TimeoutException:
            answer = CheckAnswer.TIMEOUT
        except (httpx.HTTPError, OSError) as error:
            log.info("check of %s via %s failed: %s", candidate.half.message_id, listener.instance_id, error)
            answer = CheckAnswer.ERROR
        CHECKS.labels(answer.value.lower()).inc()
        latency_ms = int((time.monotonic() - started) * 1000)
        try:
            half = candidate.half
            await self.halves.record_check_answer(half.message_id, half.check_times, answer, latency_ms)
        except BrokerError as error:  # the history is for operators; the answer is still acted on
            log.warning("could not record the check of %s: %s", candidate.half.message_id, error)
        return answer

    async def _ask(self, candidate: CheckCandidate, listener: Listener) -> CheckAnswer:
        assert listener.callback_url is not None
        if httpx.URL(listener.callback_url).scheme not in ("http", "https"):
            raise CallbackNotAllowed(f"callback URLs must be http or https: {listener.callback_url}")
        body = orjson.dumps(check_payload(candidate))
        headers = {"content-type": "application/json"}
        if listener.secret:
            headers[SIGNATURE_HEADER] = signature(listener.secret, body)
        # The client connects only to allowed addresses and never follows a redirect (checker/guarded_http.py).
        async with self.http.stream(
            "POST", listener.callback_url, content=body, headers=headers, timeout=self.settings.check_timeout_seconds
        ) as response:
            if response.status_code != 200:
                return CheckAnswer.ERROR  # a redirect too (it is not followed); counted as a check all the same
            answer = bytearray()
            async for chunk in response.aiter_bytes():
                answer += chunk
                if len(answer) > MAX_ANSWER_BYTES:
                    raise CallbackNotAllowed(f"the listener's answer is over {MAX_ANSWER_BYTES} bytes")
        return CheckAnswer(parse_answer(bytes(answer)))

    async def _discard(self, half: HalfMessage) -> int:
        try:
            await self.halves.discard(half.message_id)
        except AlreadyResolved:
            return 0
        log.warning(
            "discarded half message %s of group %s after %d checks", half.message_id, half.producer_group, half.check_times
        )
        return 1
