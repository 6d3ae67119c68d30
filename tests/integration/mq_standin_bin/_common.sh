# shared by the MQ command stand-ins: the state directory and the call log
STATE="${MQ_STANDIN_STATE:-$(dirname "$0")/state}"
mkdir -p "$STATE"
echo "$(basename "$0") $*" >> "$STATE/calls.log"
unknown() { echo "AMQ7048E: The queue manager name is either not valid or not known." >&2; exit 72; }
