#!/usr/bin/env bash
# mk_manifest.sh TAG CUBIN_DIR > manifest: every variant of var/TAG_*.cu, the full kernel first;
# variants that compute the same function are "check", the others "diag".
tag=$1; dir=$2
order="full xglobal xglobal_lb9 rot rot_lb9 rotearly rotearly_lb9 rotxg rotxg_lb9 pf1 noepi nosz loadsonly nodecode nomma noload noload_lb9 noglobal noglobal_lb9 full"
for v in $order; do
  [ -f var/${tag}_$v.cu ] || continue
  case $v in full|xglobal*|rot*|pf1) k=check;; *) k=diag;; esac
  lab=$v; [ "$v" = full ] && [ -n "$seen_full" ] && lab=full_again
  seen_full=1
  echo "$lab|$dir/${tag}_$v.cubin|gemv_int4_$v|$k"
done
