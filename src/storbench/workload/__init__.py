"""What I/O to do: fio jobs and job files (jobfile), sizes, and the built-in suites
(suites). Import what you need from those modules: this package loads nothing, so
that importing workload.sizes (as the analysis does) does not build every suite."""
