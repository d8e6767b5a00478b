"""Where EFA interfaces go on an instance, per the EC2 user guide's rules for
accelerated instance types (shared/reference/hardware.md, "Attaching EFA interfaces"):

- the primary interface (card 0, device 0) is ENA: an EFA-only interface is never primary;
- card 0 gets an EFA-only interface at device 1;
- every further card gets one EFA-only interface at device 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class InterfaceSlot:
    network_card_index: int
    device_index: int
    interface_type: Literal["interface", "efa-only"]

    @property
    def is_efa(self) -> bool:
        return self.interface_type == "efa-only"


def efa_layout(efa_count: int, network_cards: int) -> list[InterfaceSlot]:
    """The primary ENA, then `efa_count` EFA-only interfaces, one per network card."""
    if efa_count > network_cards:
        raise ValueError(f"{efa_count} EFA interfaces need {efa_count} network cards; the type has {network_cards}")
    slots = [InterfaceSlot(0, 0, "interface")]
    if efa_count:
        slots.append(InterfaceSlot(0, 1, "efa-only"))
        slots += [InterfaceSlot(card, 0, "efa-only") for card in range(1, efa_count)]
    return slots
