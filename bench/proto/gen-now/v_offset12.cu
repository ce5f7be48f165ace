extern "C" __global__ void __launch_bounds__(128, 12)
gemv_int4_offset12(
    const unsigned* __restrict__ w_qweight, // u32[11141120] read, w.qweight
    const wf_f16* __restrict__ w_scales, // f16[696320] read, w.scales
    const unsigned* __restrict__ w_qzeros, // u32[87040] read, w.qzeros
    const wf_f16* __restrict__ x, // f16[5120] read, x.data
    wf_f16* __restrict__ y, // f16[17408] write, y.data
    float* __restrict__ splitk_partials, // f32[69632] read_write, scratch
    unsigned* splitk_counter, // u32[544] read_write, arrival counter (monotonic, zeroed once)
    const unsigned epoch) // u32 epoch
{
    alignas(16) __shared__ unsigned lds_0[1];
    alignas(16) __shared__ float lds_1[128];
    alignas(16) __shared__ unsigned lds_2[640];
    __shared__ float wo_unit[20];
    unsigned tile0_0 = 0u;
    unsigned tile_1 = 0u;
    unsigned kpart_2 = 0u;
    unsigned cwarp_3 = 0u;
    unsigned kwarp_4 = 0u;
    unsigned quad_5 = 0u;
    unsigned tq_6 = 0u;
    unsigned n0_7 = 0u;
    float acc_8 = 0.0f;
    float acc_9 = 0.0f;
    float acc_10 = 0.0f;
    float acc_11 = 0.0f;
    float acc_12 = 0.0f;
    float acc_13 = 0.0f;
    float acc_14 = 0.0f;
    float acc_15 = 0.0f;
    wf_f16 xh_17 = {};
    wf_f16 xh_18 = {};
    wf_f16 xh_19 = {};
    wf_f16 xh_20 = {};
    wf_f16 xh_21 = {};
    wf_f16 xh_22 = {};
    wf_f16 xh_23 = {};
    wf_f16 xh_24 = {};
    wf_f16 scale_h_26 = {};
    wf_f16 scale_h_27 = {};
    wf_f16 scale_h_28 = {};
    wf_f16 scale_h_29 = {};
    unsigned zero_word_30 = 0u;
    unsigned qword_31 = 0u;
    unsigned qword_32 = 0u;
    unsigned qword_33 = 0u;
    unsigned qword_34 = 0u;
    unsigned qword_35 = 0u;
    unsigned qword_36 = 0u;
    unsigned qword_37 = 0u;
    unsigned qword_38 = 0u;
    unsigned qword_39 = 0u;
    unsigned qword_40 = 0u;
    unsigned qword_41 = 0u;
    unsigned qword_42 = 0u;
    unsigned qword_43 = 0u;
    unsigned qword_44 = 0u;
    unsigned qword_45 = 0u;
    unsigned qword_46 = 0u;
    wf_f16 x_47 = {};
    wf_f16 x_48 = {};
    wf_f16 x_49 = {};
    wf_f16 x_50 = {};
    wf_f16 x_51 = {};
    wf_f16 x_52 = {};
    wf_f16 x_53 = {};
    wf_f16 x_54 = {};
    wf_f16 x_55 = {};
    wf_f16 x_56 = {};
    wf_f16 x_57 = {};
    wf_f16 x_58 = {};
    wf_f16 x_59 = {};
    wf_f16 x_60 = {};
    wf_f16 x_61 = {};
    wf_f16 x_62 = {};
    wf_f16 x_63 = {};
    wf_f16 x_64 = {};
    wf_f16 x_65 = {};
    wf_f16 x_66 = {};
    wf_f16 x_67 = {};
    wf_f16 x_68 = {};
    wf_f16 x_69 = {};
    wf_f16 x_70 = {};
    wf_f16 x_71 = {};
    wf_f16 x_72 = {};
    wf_f16 x_73 = {};
    wf_f16 x_74 = {};
    wf_f16 x_75 = {};
    wf_f16 x_76 = {};
    wf_f16 x_77 = {};
    wf_f16 x_78 = {};
    unsigned group_79 = 0u;
    float scale_80 = 0.0f;
    unsigned zero_pair_81 = 0u;
    unsigned zero_hi_82 = 0u;
    float scale_83 = 0.0f;
    unsigned zero_pair_84 = 0u;
    unsigned zero_hi_85 = 0u;
    float scale_86 = 0.0f;
    unsigned zero_pair_87 = 0u;
    unsigned zero_hi_88 = 0u;
    float scale_89 = 0.0f;
    unsigned zero_pair_90 = 0u;
    unsigned zero_hi_91 = 0u;
    float unit_acc_92 = 0.0f;
    float unit_acc_93 = 0.0f;
    float unit_acc_94 = 0.0f;
    float unit_acc_95 = 0.0f;
    float unit_acc_96 = 0.0f;
    float unit_acc_97 = 0.0f;
    float unit_acc_98 = 0.0f;
    float unit_acc_99 = 0.0f;
    unsigned bfrag_100 = 0u;
    unsigned bfrag_101 = 0u;
    unsigned bfrag_102 = 0u;
    unsigned bfrag_103 = 0u;
    unsigned afrag_104 = 0u;
    unsigned afrag_105 = 0u;
    unsigned afrag_106 = 0u;
    unsigned afrag_107 = 0u;
    unsigned afrag_108 = 0u;
    unsigned afrag_109 = 0u;
    unsigned afrag_110 = 0u;
    unsigned afrag_111 = 0u;
    unsigned afrag_112 = 0u;
    unsigned afrag_113 = 0u;
    unsigned afrag_114 = 0u;
    unsigned afrag_115 = 0u;
    unsigned afrag_116 = 0u;
    unsigned afrag_117 = 0u;
    unsigned afrag_118 = 0u;
    unsigned afrag_119 = 0u;
    unsigned bfrag_120 = 0u;
    unsigned bfrag_121 = 0u;
    unsigned bfrag_122 = 0u;
    unsigned bfrag_123 = 0u;
    unsigned afrag_124 = 0u;
    unsigned afrag_125 = 0u;
    unsigned afrag_126 = 0u;
    unsigned afrag_127 = 0u;
    unsigned afrag_128 = 0u;
    unsigned afrag_129 = 0u;
    unsigned afrag_130 = 0u;
    unsigned afrag_131 = 0u;
    unsigned afrag_132 = 0u;
    unsigned afrag_133 = 0u;
    unsigned afrag_134 = 0u;
    unsigned afrag_135 = 0u;
    unsigned afrag_136 = 0u;
    unsigned afrag_137 = 0u;
    unsigned afrag_138 = 0u;
    unsigned afrag_139 = 0u;
    unsigned bfrag_140 = 0u;
    unsigned bfrag_141 = 0u;
    unsigned bfrag_142 = 0u;
    unsigned bfrag_143 = 0u;
    unsigned afrag_144 = 0u;
    unsigned afrag_145 = 0u;
    unsigned afrag_146 = 0u;
    unsigned afrag_147 = 0u;
    unsigned afrag_148 = 0u;
    unsigned afrag_149 = 0u;
    unsigned afrag_150 = 0u;
    unsigned afrag_151 = 0u;
    unsigned afrag_152 = 0u;
    unsigned afrag_153 = 0u;
    unsigned afrag_154 = 0u;
    unsigned afrag_155 = 0u;
    unsigned afrag_156 = 0u;
    unsigned afrag_157 = 0u;
    unsigned afrag_158 = 0u;
    unsigned afrag_159 = 0u;
    unsigned bfrag_160 = 0u;
    unsigned bfrag_161 = 0u;
    unsigned bfrag_162 = 0u;
    unsigned bfrag_163 = 0u;
    unsigned afrag_164 = 0u;
    unsigned afrag_165 = 0u;
    unsigned afrag_166 = 0u;
    unsigned afrag_167 = 0u;
    unsigned afrag_168 = 0u;
    unsigned afrag_169 = 0u;
    unsigned afrag_170 = 0u;
    unsigned afrag_171 = 0u;
    unsigned afrag_172 = 0u;
    unsigned afrag_173 = 0u;
    unsigned afrag_174 = 0u;
    unsigned afrag_175 = 0u;
    unsigned afrag_176 = 0u;
    unsigned afrag_177 = 0u;
    unsigned afrag_178 = 0u;
    unsigned afrag_179 = 0u;
    unsigned c_180 = 0u;
    unsigned col_181 = 0u;
    float dot_182 = 0.0f;
    float part_184 = 0.0f;
    unsigned arrived_185 = 0u;
    unsigned last_186 = 0u;
    unsigned c_187 = 0u;
    unsigned col_188 = 0u;
    float dot_189 = 0.0f;
    float part_191 = 0.0f;
    wf_f16 h_192 = {};
    // gemv_int4: 2176 workgroups x 128 lanes, each owning root columns [wg_id*32, wg_id*32 + 32) of 17408 for 1 batch row(s)
    tile_1 = blockIdx.x % 544u;
    tile0_0 = tile_1 * 32u;
    // split-K: 4 workgroups per column tile; this one sums K part wg_id / 544 (the last to arrive adds the parts)
    kpart_2 = blockIdx.x / 544u;
    // GPTQ INT4 GEMV on the tensor cores: warp w covers 32 columns (column warp w % 1) and K slice w / 1 of 4, units of 16 K-words round robin; lane quad g = lane / 4 loads 4 packed columns n0..n0+3 at K-word 4*step + lane % 4 (16 bytes) and takes batch row g's 8 activations there from LDS; q - z exact in FP16 (0x6400 | q is 1024 + q), mma.m16n8k16 with f32 accumulation, the scale per unit in f32
    cwarp_3 = (threadIdx.x / 32u) % 1u;
    kwarp_4 = (threadIdx.x / 32u);
    quad_5 = (threadIdx.x & 31u) / 4u;
    tq_6 = (threadIdx.x & 31u) % 4u;
    n0_7 = tile0_0 + ((cwarp_3 * 32u) + (quad_5 * 4u));
    acc_8 = 0.0f;
    acc_9 = 0.0f;
    acc_10 = 0.0f;
    acc_11 = 0.0f;
    acc_12 = 0.0f;
    acc_13 = 0.0f;
    acc_14 = 0.0f;
    acc_15 = 0.0f;
    // activations of this K part to LDS once, in B-fragment order: entry (b, w) = (x0,x4), (x1,x5), (x2,x6), (x3,x7) of batch row b at the part's K-word w
    for (unsigned xi_16 = threadIdx.x; xi_16 < 160u; xi_16 += 128u) {
        {
            const uint4 wf_v = *reinterpret_cast<const uint4*>(&x[(((kpart_2 * 10u) * 16u) + xi_16) * 8u]);
            xh_17 = (wf_f16)wf_v.x;
            xh_18 = (wf_f16)(wf_v.x >> 16);
            xh_19 = (wf_f16)wf_v.y;
            xh_20 = (wf_f16)(wf_v.y >> 16);
            xh_21 = (wf_f16)wf_v.z;
            xh_22 = (wf_f16)(wf_v.z >> 16);
            xh_23 = (wf_f16)wf_v.w;
            xh_24 = (wf_f16)(wf_v.w >> 16);
        }
        {
            const float x0 = wf_f16_to_f32(xh_17), x4 = wf_f16_to_f32(xh_21), x2 = wf_f16_to_f32(xh_19), x6 = wf_f16_to_f32(xh_23);
            const float x1 = wf_f16_to_f32(xh_18), x5 = wf_f16_to_f32(xh_22), x3 = wf_f16_to_f32(xh_20), x7 = wf_f16_to_f32(xh_24);
            xh_18 = wf_f32_to_f16(x1 * 0.0625f); xh_22 = wf_f32_to_f16(x5 * 0.0625f);
            xh_20 = wf_f32_to_f16(x3 * 0.0625f); xh_24 = wf_f32_to_f16(x7 * 0.0625f);
            const float o = (x0 + x2 + x4 + x6) + (wf_f16_to_f32(xh_18) + wf_f16_to_f32(xh_20) + wf_f16_to_f32(xh_22) + wf_f16_to_f32(xh_24));
            // the unit's 16 words are 16 consecutive lanes (and iterations cover whole warps):
            // butterfly sums, the first lane of the 16 writes them
            float sa = ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7)), so = 1024.0f * o;
            for (int m = 8; m >= 1; m >>= 1) { sa += __shfl_xor_sync(0xffffffffu, sa, m); so += __shfl_xor_sync(0xffffffffu, so, m); }
            if ((xi_16 & 15u) == 0u) { wo_unit[(xi_16 / 16u) * 2u] = sa; wo_unit[(xi_16 / 16u) * 2u + 1u] = so; }
        }
        *reinterpret_cast<uint4*>(&lds_2[xi_16 * 4u]) = make_uint4(((unsigned)((unsigned short)xh_17) | ((unsigned)((unsigned short)xh_21) << 16)), ((unsigned)((unsigned short)xh_18) | ((unsigned)((unsigned short)xh_22) << 16)), ((unsigned)((unsigned short)xh_19) | ((unsigned)((unsigned short)xh_23) << 16)), ((unsigned)((unsigned short)xh_20) | ((unsigned)((unsigned short)xh_24) << 16)));
    }
    // §5.8: barrier in uniform control flow; tails are masked
    __syncthreads();
    for (unsigned group_25 = (kpart_2 * 10u) + kwarp_4; group_25 < (kpart_2 * 10u) + 10u; group_25 += 4u) {
        group_79 = group_25;
        scale_h_26 = wf_f32_to_f16(0.0f);
        scale_h_27 = wf_f32_to_f16(0.0f);
        scale_h_28 = wf_f32_to_f16(0.0f);
        scale_h_29 = wf_f32_to_f16(0.0f);
        zero_word_30 = 0u;
        qword_31 = 0u;
        qword_32 = 0u;
        qword_33 = 0u;
        qword_34 = 0u;
        qword_35 = 0u;
        qword_36 = 0u;
        qword_37 = 0u;
        qword_38 = 0u;
        qword_39 = 0u;
        qword_40 = 0u;
        qword_41 = 0u;
        qword_42 = 0u;
        qword_43 = 0u;
        qword_44 = 0u;
        qword_45 = 0u;
        qword_46 = 0u;
        if (n0_7 < 17408u) {
            {
                const uint2 wf_v = *reinterpret_cast<const uint2*>(&w_scales[(group_79 * 17408u) + n0_7]);
                scale_h_26 = (wf_f16)wf_v.x;
                scale_h_27 = (wf_f16)(wf_v.x >> 16);
                scale_h_28 = (wf_f16)wf_v.y;
                scale_h_29 = (wf_f16)(wf_v.y >> 16);
            }
            zero_word_30 = w_qzeros[(group_79 * 2176u) + (n0_7 / 8u)];
            {
                uint4 wf_v; asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(wf_v.x), "=r"(wf_v.y), "=r"(wf_v.z), "=r"(wf_v.w) : "l"(&w_qweight[(((group_25 * 16u) + tq_6) * 17408u) + n0_7]));
                qword_31 = wf_v.x;
                qword_32 = wf_v.y;
                qword_33 = wf_v.z;
                qword_34 = wf_v.w;
            }
            {
                uint4 wf_v; asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(wf_v.x), "=r"(wf_v.y), "=r"(wf_v.z), "=r"(wf_v.w) : "l"(&w_qweight[(((group_25 * 16u) + (4u + tq_6)) * 17408u) + n0_7]));
                qword_35 = wf_v.x;
                qword_36 = wf_v.y;
                qword_37 = wf_v.z;
                qword_38 = wf_v.w;
            }
            {
                uint4 wf_v; asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(wf_v.x), "=r"(wf_v.y), "=r"(wf_v.z), "=r"(wf_v.w) : "l"(&w_qweight[(((group_25 * 16u) + (8u + tq_6)) * 17408u) + n0_7]));
                qword_39 = wf_v.x;
                qword_40 = wf_v.y;
                qword_41 = wf_v.z;
                qword_42 = wf_v.w;
            }
            {
                uint4 wf_v; asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(wf_v.x), "=r"(wf_v.y), "=r"(wf_v.z), "=r"(wf_v.w) : "l"(&w_qweight[(((group_25 * 16u) + (12u + tq_6)) * 17408u) + n0_7]));
                qword_43 = wf_v.x;
                qword_44 = wf_v.y;
                qword_45 = wf_v.z;
                qword_46 = wf_v.w;
            }
        }
        scale_80 = wf_f16_to_f32(scale_h_26);
        const float zf_81 = (float)(((zero_word_30 >> ((n0_7 % 8u) * 4u)) & 0xfu) + 1u);
        scale_83 = wf_f16_to_f32(scale_h_27);
        const float zf_84 = (float)(((zero_word_30 >> (((n0_7 + 1u) % 8u) * 4u)) & 0xfu) + 1u);
        scale_86 = wf_f16_to_f32(scale_h_28);
        const float zf_87 = (float)(((zero_word_30 >> (((n0_7 + 2u) % 8u) * 4u)) & 0xfu) + 1u);
        scale_89 = wf_f16_to_f32(scale_h_29);
        const float zf_90 = (float)(((zero_word_30 >> (((n0_7 + 3u) % 8u) * 4u)) & 0xfu) + 1u);
        const float wo_sa = wo_unit[(group_25 - kpart_2 * 10u) * 2u], wo_so = wo_unit[(group_25 - kpart_2 * 10u) * 2u + 1u];
        unit_acc_92 = 0.0f;
        unit_acc_93 = 0.0f;
        unit_acc_94 = 0.0f;
        unit_acc_95 = 0.0f;
        unit_acc_96 = 0.0f;
        unit_acc_97 = 0.0f;
        unit_acc_98 = 0.0f;
        unit_acc_99 = 0.0f;
        {
            const uint4 wf_v = *reinterpret_cast<const uint4*>(&lds_2[(((group_25 * 16u) - ((kpart_2 * 10u) * 16u)) + tq_6) * 4u]);
            bfrag_100 = wf_v.x;
            bfrag_101 = wf_v.y;
            bfrag_102 = wf_v.z;
            bfrag_103 = wf_v.w;
        }
        afrag_104 = wf_and_or(qword_31, 983055u, 1677747200u);
        afrag_105 = wf_and_or(qword_32, 983055u, 1677747200u);
        afrag_106 = wf_and_or(qword_31, 15728880u, 1677747200u);
        afrag_107 = wf_and_or(qword_32, 15728880u, 1677747200u);
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};" : "+f"(unit_acc_92), "+f"(unit_acc_93), "+f"(unit_acc_94), "+f"(unit_acc_95) : "r"(afrag_104), "r"(afrag_105), "r"(afrag_106), "r"(afrag_107), "r"(bfrag_100), "r"(bfrag_101));
        afrag_108 = wf_and_or(qword_31 >> 8u, 983055u, 1677747200u);
        afrag_109 = wf_and_or(qword_32 >> 8u, 983055u, 1677747200u);
        afrag_110 = wf_and_or(qword_31 >> 8u, 15728880u, 1677747200u);
        afrag_111 = wf_and_or(qword_32 >> 8u, 15728880u, 1677747200u);
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};" : "+f"(unit_acc_92), "+f"(unit_acc_93), "+f"(unit_acc_94), "+f"(unit_acc_95) : "r"(afrag_108), "r"(afrag_109), "r"(afrag_110), "r"(afrag_111), "r"(bfrag_102), "r"(bfrag_103));
        afrag_112 = wf_and_or(qword_33, 983055u, 1677747200u);
        afrag_113 = wf_and_or(qword_34, 983055u, 1677747200u);
        afrag_114 = wf_and_or(qword_33, 15728880u, 1677747200u);
        afrag_115 = wf_and_or(qword_34, 15728880u, 1677747200u);
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};" : "+f"(unit_acc_96), "+f"(unit_acc_97), "+f"(unit_acc_98), "+f"(unit_acc_99) : "r"(afrag_112), "r"(afrag_113), "r"(afrag_114), "r"(afrag_115), "r"(bfrag_100), "r"(bfrag_101));
        afrag_116 = wf_and_or(qword_33 >> 8u, 983055u, 1677747200u);
        afrag_117 = wf_and_or(qword_34 >> 8u, 983055u, 1677747200u);
        afrag_118 = wf_and_or(qword_33 >> 8u, 15728880u, 1677747200u);
        afrag_119 = wf_and_or(qword_34 >> 8u, 15728880u, 1677747200u);
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};" : "+f"(unit_acc_96), "+f"(unit_acc_97), "+f"(unit_acc_98), "+f"(unit_acc_99) : "r"(afrag_116), "r"(afrag_117), "r"(afrag_118), "r"(afrag_119), "r"(bfrag_102), "r"(bfrag_103));
        {
            const uint4 wf_v = *reinterpret_cast<const uint4*>(&lds_2[(((group_25 * 16u) - ((kpart_2 * 10u) * 16u)) + (4u + tq_6)) * 4u]);
            bfrag_120 = wf_v.x;
            bfrag_121 = wf_v.y;
            bfrag_122 = wf_v.z;
            bfrag_123 = wf_v.w;
        }
        afrag_124 = wf_and_or(qword_35, 983055u, 1677747200u);
        afrag_125 = wf_and_or(qword_36, 983055u, 1677747200u);
        afrag_126 = wf_and_or(qword_35, 15728880u, 1677747200u);
        afrag_127 = wf_and_or(qword_36, 15728880u, 1677747200u);
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};" : "+f"(unit_acc_92), "+f"(unit_acc_93), "+f"(unit_acc_94), "+f"(unit_acc_95) : "r"(afrag_124), "r"(afrag_125), "r"(afrag_126), "r"(afrag_127), "r"(bfrag_120), "r"(bfrag_121));
        afrag_128 = wf_and_or(qword_35 >> 8u, 983055u, 1677747200u);
        afrag_129 = wf_and_or(qword_36 >> 8u, 983055u, 1677747200u);
        afrag_130 = wf_and_or(qword_35 >> 8u, 15728880u, 1677747200u);
        afrag_131 = wf_and_or(qword_36 >> 8u, 15728880u, 1677747200u);
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};" : "+f"(unit_acc_92), "+f"(unit_acc_93), "+f"(unit_acc_94), "+f"(unit_acc_95) : "r"(afrag_128), "r"(afrag_129), "r"(afrag_130), "r"(afrag_131), "r"(bfrag_122), "r"(bfrag_123));
        afrag_132 = wf_and_or(qword_37, 983055u, 1677747200u);
        afrag_133 = wf_and_or(qword_38, 983055u, 1677747200u);
        afrag_134 = wf_and_or(qword_37, 15728880u, 1677747200u);
        afrag_135 = wf_and_or(qword_38, 15728880u, 1677747200u);
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};" : "+f"(unit_acc_96), "+f"(unit_acc_97), "+f"(unit_acc_98), "+f"(unit_acc_99) : "r"(afrag_132), "r"(afrag_133), "r"(afrag_134), "r"(afrag_135), "r"(bfrag_120), "r"(bfrag_121));
        afrag_136 = wf_and_or(qword_37 >> 8u, 983055u, 1677747200u);
        afrag_137 = wf_and_or(qword_38 >> 8u, 983055u, 1677747200u);
        afrag_138 = wf_and_or(qword_37 >> 8u, 15728880u, 1677747200u);
        afrag_139 = wf_and_or(qword_38 >> 8u, 15728880u, 1677747200u);
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};" : "+f"(unit_acc_96), "+f"(unit_acc_97), "+f"(unit_acc_98), "+f"(unit_acc_99) : "r"(afrag_136), "r"(afrag_137), "r"(afrag_138), "r"(afrag_139), "r"(bfrag_122), "r"(bfrag_123));
        {
            const uint4 wf_v = *reinterpret_cast<const uint4*>(&lds_2[(((group_25 * 16u) - ((kpart_2 * 10u) * 16u)) + (8u + tq_6)) * 4u]);
            bfrag_140 = wf_v.x;
            bfrag_141 = wf_v.y;
            bfrag_142 = wf_v.z;
            bfrag_143 = wf_v.w;
        }
        afrag_144 = wf_and_or(qword_39, 983055u, 1677747200u);
        afrag_145 = wf_and_or(qword_40, 983055u, 1677747200u);
        afrag_146 = wf_and_or(qword_39, 15728880u, 1677747200u);
        afrag_147 = wf_and_or(qword_40, 15728880u, 1677747200u);
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};" : "+f"(unit_acc_92), "+f"(unit_acc_93), "+f"(unit_acc_94), "+f"(unit_acc_95) : "r"(afrag_144), "r"(afrag_145), "r"(afrag_146), "r"(afrag_147), "r"(bfrag_140), "r"(bfrag_141));
        afrag_148 = wf_and_or(qword_39 >> 8u, 983055u, 1677747200u);
        afrag_149 = wf_and_or(qword_40 >> 8u, 983055u, 1677747200u);
        afrag_150 = wf_and_or(qword_39 >> 8u, 15728880u, 1677747200u);
        afrag_151 = wf_and_or(qword_40 >> 8u, 15728880u, 1677747200u);
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};" : "+f"(unit_acc_92), "+f"(unit_acc_93), "+f"(unit_acc_94), "+f"(unit_acc_95) : "r"(afrag_148), "r"(afrag_149), "r"(afrag_150), "r"(afrag_151), "r"(bfrag_142), "r"(bfrag_143));
        afrag_152 = wf_and_or(qword_41, 983055u, 1677747200u);
        afrag_153 = wf_and_or(qword_42, 983055u, 1677747200u);
        afrag_154 = wf_and_or(qword_41, 15728880u, 1677747200u);
        afrag_155 = wf_and_or(qword_42, 15728880u, 1677747200u);
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};" : "+f"(unit_acc_96), "+f"(unit_acc_97), "+f"(unit_acc_98), "+f"(unit_acc_99) : "r"(afrag_152), "r"(afrag_153), "r"(afrag_154), "r"(afrag_155), "r"(bfrag_140), "r"(bfrag_141));
        afrag_156 = wf_and_or(qword_41 >> 8u, 983055u, 1677747200u);
        afrag_157 = wf_and_or(qword_42 >> 8u, 983055u, 1677747200u);
        afrag_158 = wf_and_or(qword_41 >> 8u, 15728880u, 1677747200u);
        afrag_159 = wf_and_or(qword_42 >> 8u, 15728880u, 1677747200u);
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};" : "+f"(unit_acc_96), "+f"(unit_acc_97), "+f"(unit_acc_98), "+f"(unit_acc_99) : "r"(afrag_156), "r"(afrag_157), "r"(afrag_158), "r"(afrag_159), "r"(bfrag_142), "r"(bfrag_143));
        {
            const uint4 wf_v = *reinterpret_cast<const uint4*>(&lds_2[(((group_25 * 16u) - ((kpart_2 * 10u) * 16u)) + (12u + tq_6)) * 4u]);
            bfrag_160 = wf_v.x;
            bfrag_161 = wf_v.y;
            bfrag_162 = wf_v.z;
            bfrag_163 = wf_v.w;
        }
        afrag_164 = wf_and_or(qword_43, 983055u, 1677747200u);
        afrag_165 = wf_and_or(qword_44, 983055u, 1677747200u);
        afrag_166 = wf_and_or(qword_43, 15728880u, 1677747200u);
        afrag_167 = wf_and_or(qword_44, 15728880u, 1677747200u);
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};" : "+f"(unit_acc_92), "+f"(unit_acc_93), "+f"(unit_acc_94), "+f"(unit_acc_95) : "r"(afrag_164), "r"(afrag_165), "r"(afrag_166), "r"(afrag_167), "r"(bfrag_160), "r"(bfrag_161));
        afrag_168 = wf_and_or(qword_43 >> 8u, 983055u, 1677747200u);
        afrag_169 = wf_and_or(qword_44 >> 8u, 983055u, 1677747200u);
        afrag_170 = wf_and_or(qword_43 >> 8u, 15728880u, 1677747200u);
        afrag_171 = wf_and_or(qword_44 >> 8u, 15728880u, 1677747200u);
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};" : "+f"(unit_acc_92), "+f"(unit_acc_93), "+f"(unit_acc_94), "+f"(unit_acc_95) : "r"(afrag_168), "r"(afrag_169), "r"(afrag_170), "r"(afrag_171), "r"(bfrag_162), "r"(bfrag_163));
        afrag_172 = wf_and_or(qword_45, 983055u, 1677747200u);
        afrag_173 = wf_and_or(qword_46, 983055u, 1677747200u);
        afrag_174 = wf_and_or(qword_45, 15728880u, 1677747200u);
        afrag_175 = wf_and_or(qword_46, 15728880u, 1677747200u);
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};" : "+f"(unit_acc_96), "+f"(unit_acc_97), "+f"(unit_acc_98), "+f"(unit_acc_99) : "r"(afrag_172), "r"(afrag_173), "r"(afrag_174), "r"(afrag_175), "r"(bfrag_160), "r"(bfrag_161));
        afrag_176 = wf_and_or(qword_45 >> 8u, 983055u, 1677747200u);
        afrag_177 = wf_and_or(qword_46 >> 8u, 983055u, 1677747200u);
        afrag_178 = wf_and_or(qword_45 >> 8u, 15728880u, 1677747200u);
        afrag_179 = wf_and_or(qword_46 >> 8u, 15728880u, 1677747200u);
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};" : "+f"(unit_acc_96), "+f"(unit_acc_97), "+f"(unit_acc_98), "+f"(unit_acc_99) : "r"(afrag_176), "r"(afrag_177), "r"(afrag_178), "r"(afrag_179), "r"(bfrag_162), "r"(bfrag_163));
        acc_8 = fmaf(scale_80, (unit_acc_92 - wo_so) - zf_81 * wo_sa, acc_8);
        acc_9 = fmaf(scale_80, (unit_acc_93 - wo_so) - zf_81 * wo_sa, acc_9);
        acc_10 = fmaf(scale_83, (unit_acc_94 - wo_so) - zf_84 * wo_sa, acc_10);
        acc_11 = fmaf(scale_83, (unit_acc_95 - wo_so) - zf_84 * wo_sa, acc_11);
        acc_12 = fmaf(scale_86, (unit_acc_96 - wo_so) - zf_87 * wo_sa, acc_12);
        acc_13 = fmaf(scale_86, (unit_acc_97 - wo_so) - zf_87 * wo_sa, acc_13);
        acc_14 = fmaf(scale_89, (unit_acc_98 - wo_so) - zf_90 * wo_sa, acc_14);
        acc_15 = fmaf(scale_89, (unit_acc_99 - wo_so) - zf_90 * wo_sa, acc_15);
    }
    // cross-slice reduction: each K slice's sums to LDS (batch rows 2t, 2t+1 of the D fragment), added in slice order after the barrier
    if ((tq_6 * 2u) < 1u) {
        lds_1[((kwarp_4 + (tq_6 * 2u)) * 32u) + ((cwarp_3 * 32u) + (quad_5 * 4u))] = acc_8;
    }
    if (((tq_6 * 2u) + 1u) < 1u) {
        lds_1[((kwarp_4 + ((tq_6 * 2u) + 1u)) * 32u) + ((cwarp_3 * 32u) + (quad_5 * 4u))] = acc_9;
    }
    if ((tq_6 * 2u) < 1u) {
        lds_1[((kwarp_4 + (tq_6 * 2u)) * 32u) + ((cwarp_3 * 32u) + ((quad_5 * 4u) + 1u))] = acc_10;
    }
    if (((tq_6 * 2u) + 1u) < 1u) {
        lds_1[((kwarp_4 + ((tq_6 * 2u) + 1u)) * 32u) + ((cwarp_3 * 32u) + ((quad_5 * 4u) + 1u))] = acc_11;
    }
    if ((tq_6 * 2u) < 1u) {
        lds_1[((kwarp_4 + (tq_6 * 2u)) * 32u) + ((cwarp_3 * 32u) + ((quad_5 * 4u) + 2u))] = acc_12;
    }
    if (((tq_6 * 2u) + 1u) < 1u) {
        lds_1[((kwarp_4 + ((tq_6 * 2u) + 1u)) * 32u) + ((cwarp_3 * 32u) + ((quad_5 * 4u) + 2u))] = acc_13;
    }
    if ((tq_6 * 2u) < 1u) {
        lds_1[((kwarp_4 + (tq_6 * 2u)) * 32u) + ((cwarp_3 * 32u) + ((quad_5 * 4u) + 3u))] = acc_14;
    }
    if (((tq_6 * 2u) + 1u) < 1u) {
        lds_1[((kwarp_4 + ((tq_6 * 2u) + 1u)) * 32u) + ((cwarp_3 * 32u) + ((quad_5 * 4u) + 3u))] = acc_15;
    }
    // §5.8: barrier in uniform control flow; tails are masked
    __syncthreads();
    // split-K: this part's sums to splitk_partials (global memory: other workgroups read them, §5.2)
    c_180 = threadIdx.x;
    col_181 = tile0_0 + c_180;
    if (c_180 < 32u) {
        dot_182 = 0.0f;
        for (unsigned t_183 = 0u; t_183 < 4u; ++t_183) {
            part_184 = lds_1[(t_183 * 32u) + c_180];
            dot_182 = dot_182 + part_184;
        }
        splitk_partials[(kpart_2 * 17408u) + col_181] = dot_182;
    }
    // split-K arrival: every lane's partials are written before the one arrival (§5.1)
    // §5.8: barrier in uniform control flow; tails are masked
    __syncthreads();
    // the arrival that reads epoch*4 - 1 is this launch's last for the tile (§5.4: the counter is never reset)
    if (threadIdx.x == 0u) {
        // §5.1: one arrival per workgroup, by an elected lane after a workgroup barrier
        arrived_185 = __nv_atomic_fetch_add(&splitk_counter[tile_1], 1u, __NV_ATOMIC_ACQ_REL, __NV_THREAD_SCOPE_DEVICE);
        lds_0[0u] = (arrived_185 == ((epoch * 4u) - 1u)) ? 1u : 0u;
    }
    // the verdict, and what the elected lane acquired, reach every lane of the workgroup
    // §5.8: barrier in uniform control flow; tails are masked
    __syncthreads();
    last_186 = lds_0[0u];
    // the tile's last arriver only: the 4 parts' sums added in part order, then the stages up to the grid barrier
    if (last_186 == 1u) {
        // elementwise stage: every lane walks its points (batch row, column) of the tile
        c_187 = threadIdx.x;
        col_188 = tile0_0 + c_187;
        if (c_187 < 32u) {
            dot_189 = 0.0f;
            for (unsigned kp_190 = 0u; kp_190 < 4u; ++kp_190) {
                part_191 = splitk_partials[(kp_190 * 17408u) + col_188];
                dot_189 = dot_189 + part_191;
            }
            h_192 = wf_f32_to_f16(dot_189);
            y[col_188] = h_192;
        }
    }
}
