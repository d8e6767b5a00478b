"""Capacity Block windows as the plan and the diff show them, with a warning as a block nears its
end (issue 12). Read off the node group components' `capacityWindow` input, so a plan JSON from
any revision can be shown the same way."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from gpuforge.catalog.aws_wiring import load_aws_wiring


@dataclass(frozen=True)
class BlockWindow:
    group: str
    start: datetime
    end: datetime
    scale_down_at: datetime  # the group's scheduled action to 0, ahead of EC2's terminations
    days_left: float

    @property
    def ending_soon(self) -> bool:
        return 0 <= self.days_left <= load_aws_wiring().capacity_blocks.warn_days_before_end

    def text(self) -> str:
        state = "ended" if self.days_left < 0 else f"ends in {self.days_left:.1f} days"
        line = (
            f"{self.group}: Capacity Block {_utc(self.start)} → {_utc(self.end)} ({state}; "
            f"scaled to 0 at {_utc(self.scale_down_at)})"
        )
        if self.ending_soon:
            line += " ⚠ ending soon: extend the block (aws ec2 purchase-capacity-block-extension) or plan the move"
        return line


def block_windows(node_groups: Iterable[dict[str, Any]], now: datetime | None = None) -> list[BlockWindow]:
    """The windows of the Capacity Block groups among node group component inputs."""
    now = now or datetime.now(UTC)
    margin = timedelta(minutes=load_aws_wiring().capacity_blocks.scale_down_before_end_minutes)
    windows = []
    for inputs in node_groups:
        window = inputs.get("capacityWindow")
        if not isinstance(window, dict):
            continue
        start, end = _parse(window["start"]), _parse(window["end"])
        windows.append(
            BlockWindow(str(inputs.get("nodeGroup")), start, end, end - margin, (end - now).total_seconds() / 86400)
        )
    return windows


def _parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def _utc(when: datetime) -> str:
    return when.strftime("%Y-%m-%d %H:%M UTC")
