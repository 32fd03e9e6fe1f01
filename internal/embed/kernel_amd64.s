#include "textflag.h"

// func dot8q(q *int8, x0, x1, x2, x3, x4, x5, x6, x7 *float32, n int, s *[8]float32)
//
// s[k] = sum over i < n of float32(q[i]) * xk[i]; n is a positive multiple of 8. AVX2 and FMA.
TEXT ·dot8q(SB), NOSPLIT, $0-88
	MOVQ q+0(FP), SI
	MOVQ x0+8(FP), DI
	MOVQ x1+16(FP), DX
	MOVQ x2+24(FP), R8
	MOVQ x3+32(FP), R9
	MOVQ x4+40(FP), R10
	MOVQ x5+48(FP), R11
	MOVQ x6+56(FP), R12
	MOVQ x7+64(FP), R13
	MOVQ n+72(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	XORQ BX, BX // index into q (bytes)
	XORQ AX, AX // index into the x rows (bytes)

loop:
	CMPQ BX, CX
	JGE  done
	VPMOVSXBD   (SI)(BX*1), Y8
	VCVTDQ2PS   Y8, Y8
	VFMADD231PS (DI)(AX*1), Y8, Y0
	VFMADD231PS (DX)(AX*1), Y8, Y1
	VFMADD231PS (R8)(AX*1), Y8, Y2
	VFMADD231PS (R9)(AX*1), Y8, Y3
	VFMADD231PS (R10)(AX*1), Y8, Y4
	VFMADD231PS (R11)(AX*1), Y8, Y5
	VFMADD231PS (R12)(AX*1), Y8, Y6
	VFMADD231PS (R13)(AX*1), Y8, Y7
	ADDQ        $8, BX
	ADDQ        $32, AX
	JMP         loop

done:
	// Horizontal sums: fold each accumulator's upper half onto its lower half, then add pairs.
	VEXTRACTF128 $1, Y0, X8
	VADDPS       X8, X0, X0
	VEXTRACTF128 $1, Y1, X8
	VADDPS       X8, X1, X1
	VEXTRACTF128 $1, Y2, X8
	VADDPS       X8, X2, X2
	VEXTRACTF128 $1, Y3, X8
	VADDPS       X8, X3, X3
	VEXTRACTF128 $1, Y4, X8
	VADDPS       X8, X4, X4
	VEXTRACTF128 $1, Y5, X8
	VADDPS       X8, X5, X5
	VEXTRACTF128 $1, Y6, X8
	VADDPS       X8, X6, X6
	VEXTRACTF128 $1, Y7, X8
	VADDPS       X8, X7, X7
	// X0 = [a0 a1 a2 a3], X1 = [b0 ...]: hadd(X0, X1) = [a0+a1 a2+a3 b0+b1 b2+b3].
	VHADDPS X1, X0, X0
	VHADDPS X3, X2, X2
	VHADDPS X2, X0, X0 // [sum a, sum b, sum c, sum d]
	VHADDPS X5, X4, X4
	VHADDPS X7, X6, X6
	VHADDPS X6, X4, X4 // [sum e, sum f, sum g, sum h]
	MOVQ    s+80(FP), AX
	VMOVUPS X0, (AX)
	VMOVUPS X4, 16(AX)
	VZEROUPPER
	RET

// func dot8q16(q *int8, x0, x1, x2, x3, x4, x5, x6, x7 *float32, n int, s *[8]float32)
//
// dot8q with 16 lanes: n is a positive multiple of 16. AVX-512F.
TEXT ·dot8q16(SB), NOSPLIT, $0-88
	MOVQ q+0(FP), SI
	MOVQ x0+8(FP), DI
	MOVQ x1+16(FP), DX
	MOVQ x2+24(FP), R8
	MOVQ x3+32(FP), R9
	MOVQ x4+40(FP), R10
	MOVQ x5+48(FP), R11
	MOVQ x6+56(FP), R12
	MOVQ x7+64(FP), R13
	MOVQ n+72(FP), CX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	XORQ BX, BX // index into q (bytes)
	XORQ AX, AX // index into the x rows (bytes)

loop16:
	CMPQ BX, CX
	JGE  done16
	VPMOVSXBD   (SI)(BX*1), Z8
	VCVTDQ2PS   Z8, Z8
	VFMADD231PS (DI)(AX*1), Z8, Z0
	VFMADD231PS (DX)(AX*1), Z8, Z1
	VFMADD231PS (R8)(AX*1), Z8, Z2
	VFMADD231PS (R9)(AX*1), Z8, Z3
	VFMADD231PS (R10)(AX*1), Z8, Z4
	VFMADD231PS (R11)(AX*1), Z8, Z5
	VFMADD231PS (R12)(AX*1), Z8, Z6
	VFMADD231PS (R13)(AX*1), Z8, Z7
	ADDQ        $16, BX
	ADDQ        $64, AX
	JMP         loop16

done16:
	// Fold the upper 256 bits of each accumulator onto the lower.
	VEXTRACTF64X4 $1, Z0, Y8
	VADDPS        Y8, Y0, Y0
	VEXTRACTF64X4 $1, Z1, Y8
	VADDPS        Y8, Y1, Y1
	VEXTRACTF64X4 $1, Z2, Y8
	VADDPS        Y8, Y2, Y2
	VEXTRACTF64X4 $1, Z3, Y8
	VADDPS        Y8, Y3, Y3
	VEXTRACTF64X4 $1, Z4, Y8
	VADDPS        Y8, Y4, Y4
	VEXTRACTF64X4 $1, Z5, Y8
	VADDPS        Y8, Y5, Y5
	VEXTRACTF64X4 $1, Z6, Y8
	VADDPS        Y8, Y6, Y6
	VEXTRACTF64X4 $1, Z7, Y8
	VADDPS        Y8, Y7, Y7
	// Horizontal sums: fold each accumulator's upper half onto its lower half, then add pairs.
	VEXTRACTF128 $1, Y0, X8
	VADDPS       X8, X0, X0
	VEXTRACTF128 $1, Y1, X8
	VADDPS       X8, X1, X1
	VEXTRACTF128 $1, Y2, X8
	VADDPS       X8, X2, X2
	VEXTRACTF128 $1, Y3, X8
	VADDPS       X8, X3, X3
	VEXTRACTF128 $1, Y4, X8
	VADDPS       X8, X4, X4
	VEXTRACTF128 $1, Y5, X8
	VADDPS       X8, X5, X5
	VEXTRACTF128 $1, Y6, X8
	VADDPS       X8, X6, X6
	VEXTRACTF128 $1, Y7, X8
	VADDPS       X8, X7, X7
	// X0 = [a0 a1 a2 a3], X1 = [b0 ...]: hadd(X0, X1) = [a0+a1 a2+a3 b0+b1 b2+b3].
	VHADDPS X1, X0, X0
	VHADDPS X3, X2, X2
	VHADDPS X2, X0, X0 // [sum a, sum b, sum c, sum d]
	VHADDPS X5, X4, X4
	VHADDPS X7, X6, X6
	VHADDPS X6, X4, X4 // [sum e, sum f, sum g, sum h]
	MOVQ    s+80(FP), AX
	VMOVUPS X0, (AX)
	VMOVUPS X4, 16(AX)
	VZEROUPPER
	RET
