# shared by the MQ command stand-ins: the state directory, the call log, and the MQI emulator
# (tests/mqemu, NOT IBM MQ) that crtmqm/strmqm/endmqm/dspmq/runmqsc/dltmqm drive. mqemu.env
# beside the scripts (written by the tests that copy them) names the emulator's directory and
# the Python to run it with; in place, they are found from here.
here="$(dirname "$0")"
STATE="${MQ_STANDIN_STATE:-$here/state}"
mkdir -p "$STATE"
echo "$(basename "$0") $*" >> "$STATE/calls.log"
MQEMU="$here/../../mqemu"
MQEMU_PYTHON=python3
[ -f "$here/mqemu.env" ] && . "$here/mqemu.env"
emulate() { MQ_STANDIN_STATE="$STATE" exec "$MQEMU_PYTHON" "$MQEMU/control.py" "$(basename "$0")" "$@"; }
