"""Whether a lab pool can take runs, for the submission service (no ssh, no engine)."""

from webapp.comparisons.models import Target
from webapp.lab.models import LabHost


def unserved_reason(target: Target) -> str | None:
    """Why a lab pool cannot take runs (no host, or every host disabled), or None; None for
    a target that is not a lab pool."""
    if not target.is_lab:
        return None
    states = set(LabHost.objects.filter(target=target).values_list("state", flat=True))
    if not states:
        return f"lab pool {target.name} has no hosts"
    if states == {LabHost.State.DISABLED}:
        return f"every host of lab pool {target.name} is disabled"
    return None
