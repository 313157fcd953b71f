"""How a VM run can end, as the VM runner reports it and a Run stores it.

A module of its own, with no imports, so that the models can name these codes without
loading libvirt (engine/vm/runner.py imports it).
"""

OK = "ok"
BOOT_FAILED = "boot-failed"
PANIC = "panic"
TIMEOUT = "timeout"
CONSOLE_OVERFLOW = "console-overflow"
INFRA = "infra-error"
