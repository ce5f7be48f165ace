extern "C" __global__ void __launch_bounds__(128)
gemv_int4_s8_early(
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
    wf_f16 x_39 = {};
    wf_f16 x_40 = {};
    wf_f16 x_41 = {};
    wf_f16 x_42 = {};
    wf_f16 x_43 = {};
    wf_f16 x_44 = {};
    wf_f16 x_45 = {};
    wf_f16 x_46 = {};
    wf_f16 x_47 = {};
    wf_f16 x_48 = {};
    wf_f16 x_49 = {};
    wf_f16 x_50 = {};
    wf_f16 x_51 = {};
    wf_f16 x_52 = {};
    wf_f16 x_53 = {};
    wf_f16 x_54 = {};
    unsigned group_55 = 0u;
    float scale_56 = 0.0f;
    unsigned zero_pair_57 = 0u;
    unsigned zero_hi_58 = 0u;
    float scale_59 = 0.0f;
    unsigned zero_pair_60 = 0u;
    unsigned zero_hi_61 = 0u;
    float scale_62 = 0.0f;
    unsigned zero_pair_63 = 0u;
    unsigned zero_hi_64 = 0u;
    float scale_65 = 0.0f;
    unsigned zero_pair_66 = 0u;
    unsigned zero_hi_67 = 0u;
    float unit_acc_68 = 0.0f;
    float unit_acc_69 = 0.0f;
    float unit_acc_70 = 0.0f;
    float unit_acc_71 = 0.0f;
    float unit_acc_72 = 0.0f;
    float unit_acc_73 = 0.0f;
    float unit_acc_74 = 0.0f;
    float unit_acc_75 = 0.0f;
    unsigned bfrag_76 = 0u;
    unsigned bfrag_77 = 0u;
    unsigned bfrag_78 = 0u;
    unsigned bfrag_79 = 0u;
    unsigned afrag_80 = 0u;
    unsigned afrag_81 = 0u;
    unsigned afrag_82 = 0u;
    unsigned afrag_83 = 0u;
    unsigned afrag_84 = 0u;
    unsigned afrag_85 = 0u;
    unsigned afrag_86 = 0u;
    unsigned afrag_87 = 0u;
    unsigned afrag_88 = 0u;
    unsigned afrag_89 = 0u;
    unsigned afrag_90 = 0u;
    unsigned afrag_91 = 0u;
    unsigned afrag_92 = 0u;
    unsigned afrag_93 = 0u;
    unsigned afrag_94 = 0u;
    unsigned afrag_95 = 0u;
    unsigned bfrag_96 = 0u;
    unsigned bfrag_97 = 0u;
    unsigned bfrag_98 = 0u;
    unsigned bfrag_99 = 0u;
    unsigned afrag_100 = 0u;
    unsigned afrag_101 = 0u;
    unsigned afrag_102 = 0u;
    unsigned afrag_103 = 0u;
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
    unsigned c_116 = 0u;
    unsigned col_117 = 0u;
    float dot_118 = 0.0f;
    float part_120 = 0.0f;
    unsigned arrived_121 = 0u;
    unsigned last_122 = 0u;
    unsigned c_123 = 0u;
    unsigned col_124 = 0u;
    float dot_125 = 0.0f;
    float part_127 = 0.0f;
    wf_f16 h_128 = {};
    // gemv_int4: 2176 workgroups x 128 lanes, each owning root columns [wg_id*32, wg_id*32 + 32) of 17408 for 1 batch row(s)
    tile_1 = blockIdx.x % 544u;
    tile0_0 = tile_1 * 32u;
    // split-K: 4 workgroups per column tile; this one sums K part wg_id / 544 (the last to arrive adds the parts)
    kpart_2 = blockIdx.x / 544u;
    // GPTQ INT4 GEMV on the tensor cores: warp w covers 32 columns (column warp w % 1) and K slice w / 1 of 4, units of 8 K-words round robin; lane quad g = lane / 4 loads 4 packed columns n0..n0+3 at K-word 4*step + lane % 4 (16 bytes) and takes batch row g's 8 activations there from LDS; q - z exact in FP16 (0x6400 | q is 1024 + q), mma.m16n8k16 with f32 accumulation, the scale per unit in f32
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
    if (((kpart_2 * 20u) + kwarp_4) < ((kpart_2 * 20u) + 20u)) {
        unsigned gq = ((kpart_2 * 20u) + kwarp_4);
        group_55 = gq / 2u;
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
        if (n0_7 < 17408u) {
            {
                const uint2 wf_v = *reinterpret_cast<const uint2*>(&w_scales[(group_55 * 17408u) + n0_7]);
                scale_h_26 = (wf_f16)wf_v.x;
                scale_h_27 = (wf_f16)(wf_v.x >> 16);
                scale_h_28 = (wf_f16)wf_v.y;
                scale_h_29 = (wf_f16)(wf_v.y >> 16);
            }
            zero_word_30 = w_qzeros[(group_55 * 2176u) + (n0_7 / 8u)];
            {
                uint4 wf_v; asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(wf_v.x), "=r"(wf_v.y), "=r"(wf_v.z), "=r"(wf_v.w) : "l"(&w_qweight[(((gq * 8u) + tq_6) * 17408u) + n0_7]));
                qword_31 = wf_v.x;
                qword_32 = wf_v.y;
                qword_33 = wf_v.z;
                qword_34 = wf_v.w;
            }
            {
                uint4 wf_v; asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(wf_v.x), "=r"(wf_v.y), "=r"(wf_v.z), "=r"(wf_v.w) : "l"(&w_qweight[(((gq * 8u) + (4u + tq_6)) * 17408u) + n0_7]));
                qword_35 = wf_v.x;
                qword_36 = wf_v.y;
                qword_37 = wf_v.z;
                qword_38 = wf_v.w;
            }
        }
    }
    // activations of this K part to LDS once, in B-fragment order: entry (b, w) = (x0,x4), (x1,x5), (x2,x6), (x3,x7) of batch row b at the part's K-word w
    for (unsigned xi_16 = threadIdx.x; xi_16 < 160u; xi_16 += 128u) {
        {
            const uint4 wf_v = *reinterpret_cast<const uint4*>(&x[(((kpart_2 * 20u) * 8u) + xi_16) * 8u]);
            xh_17 = (wf_f16)wf_v.x;
            xh_18 = (wf_f16)(wf_v.x >> 16);
            xh_19 = (wf_f16)wf_v.y;
            xh_20 = (wf_f16)(wf_v.y >> 16);
            xh_21 = (wf_f16)wf_v.z;
            xh_22 = (wf_f16)(wf_v.z >> 16);
            xh_23 = (wf_f16)wf_v.w;
            xh_24 = (wf_f16)(wf_v.w >> 16);
        }
        *reinterpret_cast<uint4*>(&lds_2[xi_16 * 4u]) = make_uint4(((unsigned)((unsigned short)xh_17) | ((unsigned)((unsigned short)xh_21) << 16)), ((unsigned)((unsigned short)xh_18) | ((unsigned)((unsigned short)xh_22) << 16)), ((unsigned)((unsigned short)xh_19) | ((unsigned)((unsigned short)xh_23) << 16)), ((unsigned)((unsigned short)xh_20) | ((unsigned)((unsigned short)xh_24) << 16)));
    }
    // §5.8: barrier in uniform control flow; tails are masked
    __syncthreads();
    for (unsigned unit_25 = ((kpart_2 * 20u) + kwarp_4); unit_25 < ((kpart_2 * 20u) + 20u); unit_25 += 4u) {
        group_55 = unit_25 / 2u;
        scale_56 = wf_f16_to_f32(scale_h_26);
        zero_pair_57 = ((((zero_word_30 >> ((n0_7 % 8u) * 4u)) & 0xfu) + 1u) + 25600u) * 65537u;
        zero_hi_58 = (((((zero_word_30 >> ((n0_7 % 8u) * 4u)) & 0xfu) + 1u) * 16u) + 54272u) * 65537u;
        scale_59 = wf_f16_to_f32(scale_h_27);
        zero_pair_60 = ((((zero_word_30 >> (((n0_7 + 1u) % 8u) * 4u)) & 0xfu) + 1u) + 25600u) * 65537u;
        zero_hi_61 = (((((zero_word_30 >> (((n0_7 + 1u) % 8u) * 4u)) & 0xfu) + 1u) * 16u) + 54272u) * 65537u;
        scale_62 = wf_f16_to_f32(scale_h_28);
        zero_pair_63 = ((((zero_word_30 >> (((n0_7 + 2u) % 8u) * 4u)) & 0xfu) + 1u) + 25600u) * 65537u;
        zero_hi_64 = (((((zero_word_30 >> (((n0_7 + 2u) % 8u) * 4u)) & 0xfu) + 1u) * 16u) + 54272u) * 65537u;
        scale_65 = wf_f16_to_f32(scale_h_29);
        zero_pair_66 = ((((zero_word_30 >> (((n0_7 + 3u) % 8u) * 4u)) & 0xfu) + 1u) + 25600u) * 65537u;
        zero_hi_67 = (((((zero_word_30 >> (((n0_7 + 3u) % 8u) * 4u)) & 0xfu) + 1u) * 16u) + 54272u) * 65537u;
        unit_acc_68 = 0.0f;
        unit_acc_69 = 0.0f;
        unit_acc_70 = 0.0f;
        unit_acc_71 = 0.0f;
        unit_acc_72 = 0.0f;
        unit_acc_73 = 0.0f;
        unit_acc_74 = 0.0f;
        unit_acc_75 = 0.0f;
        {
            const uint4 wf_v = *reinterpret_cast<const uint4*>(&lds_2[(((unit_25 * 8u) - ((kpart_2 * 20u) * 8u)) + tq_6) * 4u]);
            bfrag_76 = wf_v.x;
            bfrag_77 = wf_v.y;
            bfrag_78 = wf_v.z;
            bfrag_79 = wf_v.w;
        }
        bfrag_76 = (quad_5 < 1u) ? bfrag_76 : 0u;
        bfrag_77 = (quad_5 < 1u) ? bfrag_77 : 0u;
        bfrag_78 = (quad_5 < 1u) ? bfrag_78 : 0u;
        bfrag_79 = (quad_5 < 1u) ? bfrag_79 : 0u;
        afrag_80 = wf_sub_half2((qword_31 & 983055u) | 1677747200u, zero_pair_57);
        afrag_81 = wf_sub_half2((qword_32 & 983055u) | 1677747200u, zero_pair_60);
        afrag_82 = wf_fma_half2((qword_31 & 15728880u) | 1677747200u, 738208768u, zero_hi_58);
        afrag_83 = wf_fma_half2((qword_32 & 15728880u) | 1677747200u, 738208768u, zero_hi_61);
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};" : "+f"(unit_acc_68), "+f"(unit_acc_69), "+f"(unit_acc_70), "+f"(unit_acc_71) : "r"(afrag_80), "r"(afrag_81), "r"(afrag_82), "r"(afrag_83), "r"(bfrag_76), "r"(bfrag_77));
        afrag_84 = wf_sub_half2(((qword_31 >> 8u) & 983055u) | 1677747200u, zero_pair_57);
        afrag_85 = wf_sub_half2(((qword_32 >> 8u) & 983055u) | 1677747200u, zero_pair_60);
        afrag_86 = wf_fma_half2(((qword_31 >> 8u) & 15728880u) | 1677747200u, 738208768u, zero_hi_58);
        afrag_87 = wf_fma_half2(((qword_32 >> 8u) & 15728880u) | 1677747200u, 738208768u, zero_hi_61);
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};" : "+f"(unit_acc_68), "+f"(unit_acc_69), "+f"(unit_acc_70), "+f"(unit_acc_71) : "r"(afrag_84), "r"(afrag_85), "r"(afrag_86), "r"(afrag_87), "r"(bfrag_78), "r"(bfrag_79));
        afrag_88 = wf_sub_half2((qword_33 & 983055u) | 1677747200u, zero_pair_63);
        afrag_89 = wf_sub_half2((qword_34 & 983055u) | 1677747200u, zero_pair_66);
        afrag_90 = wf_fma_half2((qword_33 & 15728880u) | 1677747200u, 738208768u, zero_hi_64);
        afrag_91 = wf_fma_half2((qword_34 & 15728880u) | 1677747200u, 738208768u, zero_hi_67);
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};" : "+f"(unit_acc_72), "+f"(unit_acc_73), "+f"(unit_acc_74), "+f"(unit_acc_75) : "r"(afrag_88), "r"(afrag_89), "r"(afrag_90), "r"(afrag_91), "r"(bfrag_76), "r"(bfrag_77));
        afrag_92 = wf_sub_half2(((qword_33 >> 8u) & 983055u) | 1677747200u, zero_pair_63);
        afrag_93 = wf_sub_half2(((qword_34 >> 8u) & 983055u) | 1677747200u, zero_pair_66);
        afrag_94 = wf_fma_half2(((qword_33 >> 8u) & 15728880u) | 1677747200u, 738208768u, zero_hi_64);
        afrag_95 = wf_fma_half2(((qword_34 >> 8u) & 15728880u) | 1677747200u, 738208768u, zero_hi_67);
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};" : "+f"(unit_acc_72), "+f"(unit_acc_73), "+f"(unit_acc_74), "+f"(unit_acc_75) : "r"(afrag_92), "r"(afrag_93), "r"(afrag_94), "r"(afrag_95), "r"(bfrag_78), "r"(bfrag_79));
        {
            const uint4 wf_v = *reinterpret_cast<const uint4*>(&lds_2[(((unit_25 * 8u) - ((kpart_2 * 20u) * 8u)) + (4u + tq_6)) * 4u]);
            bfrag_96 = wf_v.x;
            bfrag_97 = wf_v.y;
            bfrag_98 = wf_v.z;
            bfrag_99 = wf_v.w;
        }
        bfrag_96 = (quad_5 < 1u) ? bfrag_96 : 0u;
        bfrag_97 = (quad_5 < 1u) ? bfrag_97 : 0u;
        bfrag_98 = (quad_5 < 1u) ? bfrag_98 : 0u;
        bfrag_99 = (quad_5 < 1u) ? bfrag_99 : 0u;
        afrag_100 = wf_sub_half2((qword_35 & 983055u) | 1677747200u, zero_pair_57);
        afrag_101 = wf_sub_half2((qword_36 & 983055u) | 1677747200u, zero_pair_60);
        afrag_102 = wf_fma_half2((qword_35 & 15728880u) | 1677747200u, 738208768u, zero_hi_58);
        afrag_103 = wf_fma_half2((qword_36 & 15728880u) | 1677747200u, 738208768u, zero_hi_61);
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};" : "+f"(unit_acc_68), "+f"(unit_acc_69), "+f"(unit_acc_70), "+f"(unit_acc_71) : "r"(afrag_100), "r"(afrag_101), "r"(afrag_102), "r"(afrag_103), "r"(bfrag_96), "r"(bfrag_97));
        afrag_104 = wf_sub_half2(((qword_35 >> 8u) & 983055u) | 1677747200u, zero_pair_57);
        afrag_105 = wf_sub_half2(((qword_36 >> 8u) & 983055u) | 1677747200u, zero_pair_60);
        afrag_106 = wf_fma_half2(((qword_35 >> 8u) & 15728880u) | 1677747200u, 738208768u, zero_hi_58);
        afrag_107 = wf_fma_half2(((qword_36 >> 8u) & 15728880u) | 1677747200u, 738208768u, zero_hi_61);
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};" : "+f"(unit_acc_68), "+f"(unit_acc_69), "+f"(unit_acc_70), "+f"(unit_acc_71) : "r"(afrag_104), "r"(afrag_105), "r"(afrag_106), "r"(afrag_107), "r"(bfrag_98), "r"(bfrag_99));
        afrag_108 = wf_sub_half2((qword_37 & 983055u) | 1677747200u, zero_pair_63);
        afrag_109 = wf_sub_half2((qword_38 & 983055u) | 1677747200u, zero_pair_66);
        afrag_110 = wf_fma_half2((qword_37 & 15728880u) | 1677747200u, 738208768u, zero_hi_64);
        afrag_111 = wf_fma_half2((qword_38 & 15728880u) | 1677747200u, 738208768u, zero_hi_67);
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};" : "+f"(unit_acc_72), "+f"(unit_acc_73), "+f"(unit_acc_74), "+f"(unit_acc_75) : "r"(afrag_108), "r"(afrag_109), "r"(afrag_110), "r"(afrag_111), "r"(bfrag_96), "r"(bfrag_97));
        afrag_112 = wf_sub_half2(((qword_37 >> 8u) & 983055u) | 1677747200u, zero_pair_63);
        afrag_113 = wf_sub_half2(((qword_38 >> 8u) & 983055u) | 1677747200u, zero_pair_66);
        afrag_114 = wf_fma_half2(((qword_37 >> 8u) & 15728880u) | 1677747200u, 738208768u, zero_hi_64);
        afrag_115 = wf_fma_half2(((qword_38 >> 8u) & 15728880u) | 1677747200u, 738208768u, zero_hi_67);
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};" : "+f"(unit_acc_72), "+f"(unit_acc_73), "+f"(unit_acc_74), "+f"(unit_acc_75) : "r"(afrag_112), "r"(afrag_113), "r"(afrag_114), "r"(afrag_115), "r"(bfrag_98), "r"(bfrag_99));
        acc_8 = fmaf(scale_56, unit_acc_68, acc_8);
        acc_9 = fmaf(scale_56, unit_acc_69, acc_9);
        acc_10 = fmaf(scale_59, unit_acc_70, acc_10);
        acc_11 = fmaf(scale_59, unit_acc_71, acc_11);
        acc_12 = fmaf(scale_62, unit_acc_72, acc_12);
        acc_13 = fmaf(scale_62, unit_acc_73, acc_13);
        acc_14 = fmaf(scale_65, unit_acc_74, acc_14);
        acc_15 = fmaf(scale_65, unit_acc_75, acc_15);
        if (unit_25 + 4u < ((kpart_2 * 20u) + 20u)) {
            unsigned gq = unit_25 + 4u;
        group_55 = gq / 2u;
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
        if (n0_7 < 17408u) {
            {
                const uint2 wf_v = *reinterpret_cast<const uint2*>(&w_scales[(group_55 * 17408u) + n0_7]);
                scale_h_26 = (wf_f16)wf_v.x;
                scale_h_27 = (wf_f16)(wf_v.x >> 16);
                scale_h_28 = (wf_f16)wf_v.y;
                scale_h_29 = (wf_f16)(wf_v.y >> 16);
            }
            zero_word_30 = w_qzeros[(group_55 * 2176u) + (n0_7 / 8u)];
            {
                uint4 wf_v; asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(wf_v.x), "=r"(wf_v.y), "=r"(wf_v.z), "=r"(wf_v.w) : "l"(&w_qweight[(((gq * 8u) + tq_6) * 17408u) + n0_7]));
                qword_31 = wf_v.x;
                qword_32 = wf_v.y;
                qword_33 = wf_v.z;
                qword_34 = wf_v.w;
            }
            {
                uint4 wf_v; asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(wf_v.x), "=r"(wf_v.y), "=r"(wf_v.z), "=r"(wf_v.w) : "l"(&w_qweight[(((gq * 8u) + (4u + tq_6)) * 17408u) + n0_7]));
                qword_35 = wf_v.x;
                qword_36 = wf_v.y;
                qword_37 = wf_v.z;
                qword_38 = wf_v.w;
            }
        }
        }
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
    c_116 = threadIdx.x;
    col_117 = tile0_0 + c_116;
    if (c_116 < 32u) {
        dot_118 = 0.0f;
        for (unsigned t_119 = 0u; t_119 < 4u; ++t_119) {
            part_120 = lds_1[(t_119 * 32u) + c_116];
            dot_118 = dot_118 + part_120;
        }
        splitk_partials[(kpart_2 * 17408u) + col_117] = dot_118;
    }
    // split-K arrival: every lane's partials are written before the one arrival (§5.1)
    // §5.8: barrier in uniform control flow; tails are masked
    __syncthreads();
    // the arrival that reads epoch*4 - 1 is this launch's last for the tile (§5.4: the counter is never reset)
    if (threadIdx.x == 0u) {
        // §5.1: one arrival per workgroup, by an elected lane after a workgroup barrier
        arrived_121 = __nv_atomic_fetch_add(&splitk_counter[tile_1], 1u, __NV_ATOMIC_ACQ_REL, __NV_THREAD_SCOPE_DEVICE);
        lds_0[0u] = (arrived_121 == ((epoch * 4u) - 1u)) ? 1u : 0u;
    }
    // the verdict, and what the elected lane acquired, reach every lane of the workgroup
    // §5.8: barrier in uniform control flow; tails are masked
    __syncthreads();
    last_122 = lds_0[0u];
    // the tile's last arriver only: the 4 parts' sums added in part order, then the stages up to the grid barrier
    if (last_122 == 1u) {
        // elementwise stage: every lane walks its points (batch row, column) of the tile
        c_123 = threadIdx.x;
        col_124 = tile0_0 + c_123;
        if (c_123 < 32u) {
            dot_125 = 0.0f;
            for (unsigned kp_126 = 0u; kp_126 < 4u; ++kp_126) {
                part_127 = splitk_partials[(kp_126 * 17408u) + col_124];
                dot_125 = dot_125 + part_127;
            }
            h_128 = wf_f32_to_f16(dot_125);
            y[col_124] = h_128;
        }
    }
}
