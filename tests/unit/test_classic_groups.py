"""Kafka's classic group protocol as ClassicGroups keeps it: generations, leaders, assignments, departures."""

from __future__ import annotations

import asyncio

from half_store.domain.classic_groups import ClassicState, JoinRequest, is_valid_move
from half_store.services.classic_groups import ClassicGroups
from half_store.settings import Settings


def _join(member_id: str, protocols: tuple[tuple[str, bytes], ...] = (("range", b"m"),)) -> JoinRequest:
    return JoinRequest("g", member_id, None, "client", "host", "consumer", protocols, 10_000, 2_000, True)


async def _two_members(groups: ClassicGroups) -> tuple[str, str]:
    first = await groups.join(_join(""))
    second = await groups.join(_join(""))
    assert first.error == second.error == "MEMBER_ID_REQUIRED"
    a, b = await asyncio.gather(groups.join(_join(first.member_id)), groups.join(_join(second.member_id)))
    assert a.generation_id == b.generation_id == 1 and a.leader == b.leader
    leader, follower = (a, b) if a.member_id == a.leader else (b, a)
    assert {m[0] for m in leader.members} == {a.member_id, b.member_id} and follower.members == ()
    return leader.member_id, follower.member_id


def test_members_joining_together_share_one_generation_and_get_the_leaders_assignment() -> None:
    async def scenario() -> None:
        groups = ClassicGroups(Settings(_env_file=None))
        leader, follower = await _two_members(groups)
        waiting = asyncio.ensure_future(groups.sync("g", 1, follower, {}))
        led = await groups.sync("g", 1, leader, {leader: b"A", follower: b"B"})
        assert (led.error, led.assignment, (await waiting).assignment) == (None, b"A", b"B")
        assert await groups.heartbeat("g", 1, follower) is None
        assert await groups.heartbeat("g", 0, follower) == "ILLEGAL_GENERATION"
        await groups.close()

    asyncio.run(scenario())


def test_a_departure_makes_the_others_rejoin_in_a_new_generation() -> None:
    async def scenario() -> None:
        groups = ClassicGroups(Settings(_env_file=None))
        leader, follower = await _two_members(groups)
        await asyncio.gather(groups.sync("g", 1, follower, {}), groups.sync("g", 1, leader, {}))
        assert await groups.leave("g", [follower]) == {follower: None}
        assert await groups.heartbeat("g", 1, leader) == "REBALANCE_IN_PROGRESS"
        again = await groups.join(_join(leader))
        assert (again.error, again.generation_id, again.leader) == (None, 2, leader)
        (view,) = await groups.describe(["g"])
        assert view is not None and view.state is ClassicState.COMPLETING_REBALANCE
        await groups.close()

    asyncio.run(scenario())


def test_an_unknown_member_and_an_incompatible_protocol_are_refused() -> None:
    async def scenario() -> None:
        groups = ClassicGroups(Settings(_env_file=None))
        assert (await groups.join(_join("nobody"))).error == "UNKNOWN_MEMBER_ID"
        await _two_members(groups)
        other = await groups.join(_join("", (("roundrobin", b""),)))
        assert other.error == "INCONSISTENT_GROUP_PROTOCOL"
        await groups.close()

    asyncio.run(scenario())


def test_the_state_table_allows_only_kafkas_moves() -> None:
    assert is_valid_move(ClassicState.STABLE, ClassicState.PREPARING_REBALANCE)
    assert not is_valid_move(ClassicState.EMPTY, ClassicState.STABLE)
    assert not is_valid_move(ClassicState.DEAD, ClassicState.EMPTY)
