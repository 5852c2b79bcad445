"""Every fio option storbench lets a job file use, classified: one table.

Built from fio's own option list (``fio --cmdhelp=all``, fio's options.c for the few
it does not print, and ``fio --enghelp=ENGINE`` for the engines storbench allows), for
fio 3.33 and the fio versions after it. An option that is not in this table is
refused: a newer fio cannot open a hole by adding an option storbench has not looked
at (tests/workload/test_options.py fails when the installed fio has one).

Kinds:

- VALUE: changes only how the I/O is done or reported (sizes, rates, patterns of
  offsets, latency targets, ...).
- NAME: names a job (``name=``, ``wait_for=``): fio puts job names into file names,
  so a name must be plain (``[A-Za-z0-9._-]``, no ``..``), as section names are.
- PATH: names a file fio opens: a relative path without ``..`` (resolved into the
  scratch directory), never an absolute one.
- PATTERN: a data pattern, which fio may read from a file (``'FILE'`` in quotes):
  a file is refused, numbers and "strings" are not.
- COMMAND: runs a program (``exec_prerun=``, the exec engine's ``program=``): only
  with ``--allow-exec``.
- ENGINE: ``ioengine=``: checked against ENGINES below.
- OWNED: storbench sets it itself (``directory=`` is replaced, ``filename_format=`` is
  storbench's; DROPPED's are left out: ``gtod_reduce`` drops latency,
  ``unified_rw_reporting`` joins reads and writes).
- REFUSED: changes the machine for everyone, or leaves the target (the device's I/O
  scheduler, cgroups, a built-in profile with devices of its own, writing to a mounted
  device).
"""

from __future__ import annotations

import enum


class Kind(enum.Enum):
    VALUE = "value"
    NAME = "name"
    PATH = "path"
    PATTERN = "pattern"
    COMMAND = "command"
    ENGINE = "engine"
    OWNED = "owned"
    REFUSED = "refused"


_VALUE = """
allow_file_create allrandrepeat atomic ba block_error_percentiles bs bs_is_seq_rand
bs_unaligned bsrange bssplit buffer_compress_chunk buffer_compress_percentage buffered
bwavgtime clocksource comm continue_on_error cpumask cpus_allowed
cpus_allowed_policy create_fsync create_on_open create_only create_serialize dataplacement
dedupe_global dedupe_mode dedupe_percentage dedupe_working_set_percentage description
direct disable_bw_measurement disable_slat disk_util do_verify
end_fsync end_syncfs error_dump exit_what exitall exitall_on_error experimental_verify
fadvise_hint fallocate fdatasync fdp file_append file_service_type filesize filetype
fill_device flow flow_id flow_sleep flow_watermark fsync fsync_on_close gid gpu_dev_id
group_reporting gtod_cpu hugepage-size ignore_error ignore_zone_limits invalidate io_size
io_submit_mode iodepth iodepth_batch iodepth_batch_complete_max iodepth_batch_complete_min
iodepth_low iomem_align iopsavgtime job_max_open_zones job_start_clock_id kb_base
lat_percentiles latency_percentile latency_run latency_target latency_window lockfile
lockmem log_alternate_epoch log_alternate_epoch_clock_id log_avg_msec log_compression
log_compression_cpus log_entries log_hist_coarseness log_hist_msec log_issue_time
log_max_value log_offset log_prio log_store_compressed log_unix_epoch log_window_value
loops max_latency max_open_zones merge_blktrace_iters merge_blktrace_scalars new_group
nice norandommap nrfiles num_range numa_cpu_nodes numa_mem_policy number_ios numjobs
offset offset_align offset_increment openfiles overwrite per_job_logs percentage_random
percentage_sequential percentile_list plid_select plids pre_read prio prioclass priohint
ramp_size ramp_time random_distribution random_generator random_sequence_stride
randrepeat randseed rate rate_cycle rate_ignore_thinktime rate_iops rate_iops_min rate_min
rate_process read_beyond_wp read_iolog_chunked recover_zbd_write_error refill_buffers
replay_align replay_no_stall replay_scale replay_skip replay_time_scale runtime rw
rw_sequencer rwmixcycle rwmixread rwmixwrite scramble_buffers serialize_overlap
significant_figures size slat_percentiles softrandommap spr_cs spr_num_regions spr_op
sprandom startdelay stats steadystate steadystate_check_interval steadystate_duration
steadystate_ramp_time stonewall sync sync_file_range thinkcycles thinktime
thinktime_blocks thinktime_blocks_type thinktime_iotime thinktime_spin thread time_based
trim_backlog trim_backlog_batch trim_percentage trim_verify_zero uid
unique_filename unit_base unlink unlink_each_loop verify verify_async verify_async_cpus
verify_backlog verify_backlog_batch verify_dump verify_fatal verify_header_seed
verify_interval verify_offset verify_only verify_pattern_interval verify_policy
verify_state_load verify_state_save verify_write_sequence verifysort verifysort_nr
write_barrier write_hint write_zone_remainder zero_buffers zone_reset_frequency
zone_reset_threshold zonecapacity zonemode zonerange zonesize zoneskip
"""

# the options of the engines storbench allows (fio --enghelp=ENGINE), all values
_ENGINE_VALUE = """
hipri hipri_percentage nowait uncached userspace_reap libaio_vectored cmdprio
cmdprio_bssplit cmdprio_class cmdprio_hint cmdprio_percentage fixedbufs force_async
nonvectored registerfiles sqthread_poll sqthread_poll_cpu cmd_type thp stat_type inplace
grace_time std_redirect
"""

PATHS: dict[str, str] = {
    "filename": "the file(s) fio does I/O on",
    "opendir": "a directory whose files fio does I/O on",
    "write_iolog": "a log of every I/O fio writes",
    "read_iolog": "an I/O log fio replays",
    "merge_blktrace_file": "a merged blktrace fio writes",
    "write_bw_log": "a bandwidth log fio writes",
    "write_lat_log": "latency logs fio writes",
    "write_iops_log": "an IOPS log fio writes",
    "write_hist_log": "a latency histogram log fio writes",
    "mem": "a file backing fio's buffers (mmap:PATH, mmaphuge:PATH)",
    "replay_redirect": "the device an I/O log is replayed onto",
    "dp_scheme": "a file of data placement rules fio reads",
    "donorname": "the e4defrag engine's donor file",
}
PATTERNS: dict[str, str] = {
    "buffer_pattern": "the data fio writes",
    "verify_pattern": "the data fio writes and checks",
}
COMMANDS: dict[str, str] = {
    "exec_prerun": "a command fio runs before the job",
    "exec_postrun": "a command fio runs after the job",
    "program": "the exec engine's program",
    "arguments": "the exec engine's program's arguments",
}
NAMES: dict[str, str] = {
    "name": "the job's name (fio names its files after it)",
    "wait_for": "the job this one waits for",
}
# left out of every job file before fio runs it (JobFile.prepared), and why: latency,
# tail latency always, and reads and writes apart
DROPPED: dict[str, str] = {
    "gtod_reduce": "it drops latency",
    "disable_clat": "it drops latency",
    "disable_lat": "it drops latency",
    "clat_percentiles": "it can drop tail latency (clat_percentiles=0)",
    # fio would report reads and writes only as one "mixed" direction (a job file with it
    # failed as "fio's job 'a' did no I/O")
    "unified_rw_reporting": "storbench reads fio's reads and writes apart",
}
OWNED: dict[str, str] = {
    "directory": "storbench points fio at its own scratch directory",
    "filename_format": "storbench names fio's files itself ($jobname.$jobnum.$filenum in"
                       " its scratch directory)",
    **{name: f"{why}: storbench leaves it out" for name, why in DROPPED.items()},
}
# fio's http engine's options: storbench writes them for an s3:// TARGET (the endpoint,
# the region, the key id, the secret key from fio's environment); a job file sets none
HTTP: dict[str, str] = {
    name: "storbench points fio's http engine at the s3:// TARGET's endpoint itself"
    for name in ("http_host", "http_user", "http_pass", "https", "http_mode", "http_verbose",
                 "http_s3_key", "http_s3_keyid", "http_s3_region", "http_s3_storage_class",
                 "http_s3_sse_customer_key", "http_s3_sse_customer_algorithm",
                 "http_swift_auth_token")
}
OBJECT_ENGINE = "http"  # the engine of an s3:// TARGET's jobs: storbench's, never a job file's
REFUSED: dict[str, str] = {
    "ioscheduler": "it switches the I/O scheduler of the device under the target, for"
                   " everyone",
    "cgroup": "it creates cgroups on this machine",
    "cgroup_nodelete": "it leaves cgroups on this machine",
    "cgroup_weight": "it changes a cgroup's weight on this machine",
    "profile": "it runs a built-in fio profile with devices of its own",
    "allow_mounted_write": "it lets fio write to a mounted device, which storbench never"
                           " does",
}

ALIASES: dict[str, str] = {
    "readwrite": "rw", "blocksize": "bs", "blockalign": "ba", "blocksize_range": "bsrange",
    "blocksize_unaligned": "bs_unaligned", "iodepth_batch_submit": "iodepth_batch",
    "iodepth_batch_complete": "iodepth_batch_complete_min", "io_limit": "io_size",
    "fill_fs": "fill_device", "fileoffset": "offset", "nr_files": "nrfiles",
    "timeout": "runtime", "iomem": "mem", "ratemin": "rate_min", "ratecycle": "rate_cycle",
    "wait_for_previous": "stonewall", "disable_bw": "disable_bw_measurement",
    "ss": "steadystate", "ss_dur": "steadystate_duration", "ss_ramp": "steadystate_ramp_time",
    "ss_interval": "steadystate_check_interval", "mem_align": "iomem_align",
    "data_placement": "dataplacement", "fdp_pli_select": "plid_select", "fdp_pli": "plids",
}

# Engines that do their I/O on files in the target (or on the one device named), and
# what they are: any other engine is refused.
ENGINES: dict[str, str] = {
    **dict.fromkeys(("sync", "psync", "vsync", "pvsync", "pvsync2", "libaio", "io_uring",
                     "posixaio", "mmap", "splice"), "file I/O"),
    **dict.fromkeys(("filecreate", "filestat", "filedelete", "dircreate", "dirstat",
                     "dirdelete", "falloc", "ftruncate", "e4defrag"), "file operations"),
    "null": "no I/O at all (fio's own overhead)",
}
COMMAND_ENGINES = ("exec",)  # runs ``program=`` with ``arguments=``: --allow-exec

TABLE: dict[str, Kind] = {
    **dict.fromkeys(_VALUE.split(), Kind.VALUE),
    **dict.fromkeys(_ENGINE_VALUE.split(), Kind.VALUE),
    **dict.fromkeys(PATHS, Kind.PATH),
    **dict.fromkeys(PATTERNS, Kind.PATTERN),
    **dict.fromkeys(COMMANDS, Kind.COMMAND),
    **dict.fromkeys(NAMES, Kind.NAME),
    **dict.fromkeys(OWNED, Kind.OWNED),
    **dict.fromkeys(HTTP, Kind.OWNED),
    **dict.fromkeys(REFUSED, Kind.REFUSED),
    "ioengine": Kind.ENGINE,
}


def canonical(key: str) -> str:
    """fio's own name for an option (``readwrite`` -> ``rw``); as given if unknown."""
    return ALIASES.get(key, key)


def kind(key: str) -> Kind | None:
    """How an option is treated; None: not in the table (refused)."""
    return TABLE.get(canonical(key))


def what(key: str) -> str:
    """What an option that reaches outside does, for messages."""
    name = canonical(key)
    for table in (PATHS, PATTERNS, COMMANDS, NAMES, OWNED, HTTP, REFUSED):
        if name in table:
            return table[name]
    return "an option of fio"
