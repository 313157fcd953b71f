"""rcubench's execution engine: kernel builds (build/), VM runs under libvirt (vm/), bare-metal
lab runs over ssh + kexec (lab/) and what both runners share (run/: the console watch, run
outcomes, host load). No Django: the web app's services call it with plain values and turn
its results into rows, and it is tested without a database."""
