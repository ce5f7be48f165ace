#!/usr/bin/env bash
# mk_manifest.sh TAG CUBIN_DIR > manifest (as ../2026-12-03-h200-int4-gap/mk_manifest.sh, this folder's
# variant list): every variant of var/TAG_*.cu, the full kernel first and last; variants that compute the
# same function are "check", the others "diag".
tag=$1; dir=$2
order="full xglobal pf1 pf1early rot rotearly noepi nosz loadsonly nodecode nomma noload noglobal noloop empty full"
for v in $order; do
  [ -f var/${tag}_$v.cu ] || continue
  case $v in full|xglobal*|rot*|pf1*) k=check;; *) k=diag;; esac
  lab=$v; [ "$v" = full ] && [ -n "$seen_full" ] && lab=full_again
  seen_full=1
  echo "$lab|$dir/${tag}_$v.cubin|gemv_int4_$v|$k"
done
