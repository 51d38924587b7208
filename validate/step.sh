# Sourced by the device scripts (validate/on-device.sh, validate/clover.sh), which set
# $res first.
step() { # name, command...: run it, record its exit code and seconds in $res/status.txt
    local name=$1; shift
    echo; echo "===== $name: $*"
    local t0=$(date +%s%N)
    "$@"
    local rc=$?
    echo "$name rc=$rc $(( ($(date +%s%N) - t0) / 1000000 )) ms" >>"$res/status.txt"
    return $rc
}
