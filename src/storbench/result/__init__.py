"""The typed, unit-explicit result model parsed from fio's JSON (result/model.py,
result/fio_json.py, ...). Loads nothing itself: `storbench list` needs only the run
records (result/record.py), not the parser."""
