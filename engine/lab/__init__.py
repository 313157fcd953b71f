"""The bare-metal lab runner: ssh + kexec, the host's console command, power recovery."""
