# Reading a `bun test` log, for .ci/run (sourced; test/ci/suite-log.test.ts feeds it sample logs).
# Bun prints a "test/x.test.ts:" line before each file's results, "(fail) name" per failed test, and at
# the end " N pass", " N fail", " N error(s)" (errors outside any test: a file that cannot load, an
# exception between tests) and "Ran N tests across M files.". A file that throws while loading adds
# to " N fail" without a "(fail)" line.

# The last " N <word>" summary count of a log (0 when absent).
suite_count() {
  local n
  n=$(grep -Eo "^ *[0-9]+ $2\$" "$1" | tail -1 | grep -Eo '[0-9]+')
  echo "${n:-0}"
}

# Errors outside any test (" 1 error", " 2 errors").
suite_errors() {
  local n
  n=$(grep -Eo '^ *[0-9]+ errors?$' "$1" | tail -1 | grep -Eo '[0-9]+')
  echo "${n:-0}"
}

# One line per "(fail)" line: the file it was printed under. Bun's closing recap of the failures
# ("N tests failed:") repeats them and is not read.
fail_attributions() {
  awk '/^[0-9]+ tests? failed:/ { exit }
       /^test\/.*\.test\.tsx?:$/ { file = substr($0, 1, length($0) - 1) }
       /^\(fail\)/ { print (file == "" ? "?" : file) }' "$1"
}

# The files whose failed tests may be run again, one a line, when every failure of a failed run is a
# failed test of one of them (at most `max` files, 5 by default). Otherwise nothing is printed, the
# reason goes to stderr and the status is 1: a run that ended without its summary, an error outside
# any test, a failure counted but not printed under a file (a file that did not load), no failed test.
retryable_files() {
  local log=$1 max=${2:-5} total errors attributed files
  if ! grep -Eq '^Ran [0-9]+ tests? across [0-9]+ files?\.' "$log"; then
    echo "the run ended without its summary" >&2
    return 1
  fi
  total=$(suite_count "$log" fail)
  errors=$(suite_errors "$log")
  attributed=$(fail_attributions "$log" | grep -cv '^?$')
  if [ "$errors" -gt 0 ]; then
    echo "$errors error(s) outside any test" >&2
    return 1
  fi
  if [ "$total" -eq 0 ]; then
    echo "the run failed with no failed test" >&2
    return 1
  fi
  if [ "$attributed" -ne "$total" ]; then
    echo "$total failed, of which $attributed are failed tests of a file" >&2
    return 1
  fi
  files=$(fail_attributions "$log" | sort -u)
  if [ "$(wc -l <<<"$files")" -gt "$max" ]; then
    echo "$(wc -l <<<"$files") files failed (more than $max)" >&2
    return 1
  fi
  printf '%s\n' "$files"
}
