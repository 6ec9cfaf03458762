/* Includes the template LA_TEMPLATE once per linear-algebra element type,
 * with LA_T (the element), LA_R (its real type), LA_CPLX, LA_CX(re, im) (a
 * complex value, complex types only), LA_DTYPE, LA_RDTYPE (the real
 * part's nrt_dtype) and LA_NAME(x) (x with the type's suffix: _f32, _f64,
 * _c64, _c128) defined. Not include-guarded: each template comes here. */
#include <complex.h>

#define LA_T float
#define LA_R float
#define LA_CPLX 0
#define LA_DTYPE NRT_FLOAT32
#define LA_RDTYPE NRT_FLOAT32
#define LA_NAME(x) la_##x##_f32
#include LA_TEMPLATE
#undef LA_T
#undef LA_R
#undef LA_CPLX
#undef LA_DTYPE
#undef LA_RDTYPE
#undef LA_NAME

#define LA_T double
#define LA_R double
#define LA_CPLX 0
#define LA_DTYPE NRT_FLOAT64
#define LA_RDTYPE NRT_FLOAT64
#define LA_NAME(x) la_##x##_f64
#include LA_TEMPLATE
#undef LA_T
#undef LA_R
#undef LA_CPLX
#undef LA_DTYPE
#undef LA_RDTYPE
#undef LA_NAME

#define LA_T float _Complex
#define LA_R float
#define LA_CPLX 1
#define LA_CX(re, im) CMPLXF(re, im)
#define LA_DTYPE NRT_COMPLEX64
#define LA_RDTYPE NRT_FLOAT32
#define LA_NAME(x) la_##x##_c64
#include LA_TEMPLATE
#undef LA_T
#undef LA_R
#undef LA_CPLX
#undef LA_CX
#undef LA_DTYPE
#undef LA_RDTYPE
#undef LA_NAME

#define LA_T double _Complex
#define LA_R double
#define LA_CPLX 1
#define LA_CX(re, im) CMPLX(re, im)
#define LA_DTYPE NRT_COMPLEX128
#define LA_RDTYPE NRT_FLOAT64
#define LA_NAME(x) la_##x##_c128
#include LA_TEMPLATE
#undef LA_T
#undef LA_R
#undef LA_CPLX
#undef LA_CX
#undef LA_DTYPE
#undef LA_RDTYPE
#undef LA_NAME
