"""The integral-defined special functions of `jax.scipy.special`, by the same approximations
JAX uses, composed from meshsim's operations:

- dawsn, fresnel, sici, spence: Cephes' rational approximations (three ranges for dawsn, small
  and asymptotic ranges for fresnel and sici; the float32 fresnel uses Cephes' fresnlf);
- wofz: Weideman's (1994) rational expansion with N = 32 terms in the upper half plane, reflected
  to the lower half plane; its coefficients are computed here from Weideman's FFT formula;
- owens_t: Patefield and Tandy's method T5, a Gauss-Legendre quadrature whose 13 nodes are the
  squares of the positive nodes of the 26-point rule, with the reciprocal identity for |a| > 1.

Each carries JAX's custom derivative (the integrand at the argument)."""
from __future__ import annotations

import math

import numpy as np

from meshsim._src.numpy import namespace as jnp
from meshsim._src.lax import namespace as lax
from meshsim._src.ad import custom_jvp
from meshsim._src.scipy.special import _float

__all__ = ["dawsn", "fresnel", "sici", "spence", "wofz", "owens_t"]


def _poly(coefs, x):
    """Horner's rule with the coefficients, highest power first, in x's dtype."""
    return jnp.polyval(np.asarray(coefs, dtype=x.dtype), x)


def _in_float32_or_wider(fn, x):
    """fn(x), computed in float32 for the half-precision types (their tables lose too much)."""
    if x.dtype in (np.float32, np.float64):
        return fn(x)
    out = fn(x.astype(np.float32))
    return tuple(v.astype(x.dtype) for v in out) if isinstance(out, tuple) else out.astype(x.dtype)


def _real(name: str, x):
    x, = _float(x)
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        raise ValueError(f"{name} does not support complex-valued inputs.")
    return x


# --- Dawson's integral (Cephes dawsn.c) -------------------------------------------------------

_DAWSN_AN = [1.13681498971755972054e-11, 8.49262267667473811108e-10, 1.94434204175553054283e-8,
             9.53151741254484363489e-7, 3.07828309874913200438e-6, 3.52513368520288738649e-4,
             -8.50149846724410912031e-4, 4.22618223005546594270e-2, -9.17480371773452345351e-2,
             9.99999999999999994612e-1]
_DAWSN_AD = [2.40372073066762605484e-11, 1.48864681368493396752e-9, 5.21265281010541664570e-8,
             1.27258478273186970203e-6, 2.32490249820789513991e-5, 3.25524741826057911661e-4,
             3.48805814657162590916e-3, 2.79448531198828973716e-2, 1.58874241960120565368e-1,
             5.74918629489320327824e-1, 1.00000000000000000539e0]
_DAWSN_BN = [5.08955156417900903354e-1, -2.44754418142697847934e-1, 9.41512335303534411857e-2,
             -2.18711255142039025206e-2, 3.66207612329569181322e-3, -4.23209114460388756528e-4,
             3.59641304793896631888e-5, -2.14640351719968974225e-6, 9.10010780076391431042e-8,
             -2.40274520828250956942e-9, 3.59233385440928410398e-11]
_DAWSN_BD = [1.0, -6.31839869873368190192e-1, 2.36706788228248691528e-1,
             -5.31806367003223277662e-2, 8.48041718586295374409e-3, -9.47996768486665330168e-4,
             7.81025592944552338085e-5, -4.55875153252442634831e-6, 1.89100358111421846170e-7,
             -4.91324691331920606875e-9, 7.18466403235734541950e-11]
_DAWSN_CN = [-5.90592860534773254987e-1, 6.29235242724368800674e-1, -1.72858975380388136411e-1,
             1.64837047825189632310e-2, -4.86827613020462700845e-4]
_DAWSN_CD = [1.0, -2.69820057197544900361e0, 1.73270799045947845857e0,
             -3.93708582281939493482e-1, 3.44278924041233391079e-2, -9.73655226040941223894e-4]


def _dawsn_float(x):
    ax = jnp.abs(x)
    small, middle = ax < 3.25, (ax >= 3.25) & (ax < 6.25)
    # Each range evaluates at a harmless point outside itself, so no branch makes a nan or inf.
    ax_small = jnp.where(small, ax, 1.0)
    near = ax_small * _poly(_DAWSN_AN, ax_small * ax_small) / _poly(_DAWSN_AD, ax_small * ax_small)
    inv_sq = 1.0 / (ax * ax)

    def asymptotic(in_range, num, den):
        t = jnp.where(in_range, inv_sq, 1.0)
        a = jnp.where(in_range, ax, 1.0)
        return (0.5 / a) * (1.0 + t * _poly(num, t) / _poly(den, t))
    mid = asymptotic(middle, _DAWSN_BN, _DAWSN_BD)
    far = asymptotic(ax >= 6.25, _DAWSN_CN, _DAWSN_CD)
    return jnp.sign(x) * jnp.where(small, near, jnp.where(middle, mid, far))


@custom_jvp
def _dawsn(x):
    return _in_float32_or_wider(_dawsn_float, x)


@_dawsn.defjvp
def _dawsn_jvp(primals, tangents):
    x, = primals
    out = _dawsn(x)
    return out, tangents[0] * (1.0 - 2.0 * x * out)


def dawsn(x):
    """Dawson's integral exp(-x^2) * integral_0^x exp(t^2) dt."""
    return _dawsn(_real("dawsn", x))


# --- Fresnel integrals (Cephes fresnl.c, fresnlf for float32) ---------------------------------

_FRESNEL32 = dict(
    sn=[1.647629463788700e-9, -1.522754752581096e-7, 8.424748808502400e-6, -3.120693124703272e-4,
        7.244727626597022e-3, -9.228055941124598e-2, 5.235987735681432e-1],
    cn=[1.416802502367354e-8, -1.157231412229871e-6, 5.387223446683264e-5, -1.604381798862293e-3,
        2.818489036795073e-2, -2.467398198317899e-1, 9.999999760004487e-1],
    fn=[-1.903009855649792e12, 1.355942388050252e11, -4.158143148511033e9, 7.343848463587323e7,
        -8.732356681548485e5, 8.560515466275470e3, -1.032877601091159e2, 2.999401847870011e0],
    gn=[-1.860843997624650e11, 1.278350673393208e10, -3.779387713202229e8, 6.492611570598858e6,
        -7.787789623358162e4, 8.602931494734327e2, -1.493439396592284e1, 9.999841934744914e-1])
_FRESNEL64 = dict(
    sn=[-2.99181919401019853726e3, 7.08840045257738576863e5, -6.29741486205862506537e7,
        2.54890880573376359104e9, -4.42979518059697779103e10, 3.18016297876567817986e11],
    sd=[1.0, 2.81376268889994315696e2, 4.55847810806532581675e4, 5.17343888770096400730e6,
        4.19320245898111231129e8, 2.24411795645340920940e10, 6.07366389490084639049e11],
    cn=[-4.98843114573573548651e-8, 9.50428062829859605134e-6, -6.45191435683965050962e-4,
        1.88843319396703850064e-2, -2.05525900955013891793e-1, 9.99999999999999998822e-1],
    cd=[3.99982968972495980367e-12, 9.15439215774657478799e-10, 1.25001862479598821474e-7,
        1.22262789024179030997e-5, 8.68029542941784300606e-4, 4.12142090722199792936e-2,
        1.00000000000000000118e0],
    fn=[4.21543555043677546506e-1, 1.43407919780758885261e-1, 1.15220955073585758835e-2,
        3.45017939782574027900e-4, 4.63613749287867322088e-6, 3.05568983790257605827e-8,
        1.02304514164907233465e-10, 1.72010743268161828879e-13, 1.34283276233062758925e-16,
        3.76329711269987889006e-20],
    fd=[1.0, 7.51586398353378947175e-1, 1.16888925859191382142e-1, 6.44051526508858611005e-3,
        1.55934409164153020873e-4, 1.84627567348930545870e-6, 1.12699224763999035261e-8,
        3.60140029589371370404e-11, 5.88754533621578410010e-14, 4.52001434074129701496e-17,
        1.25443237090011264384e-20],
    gn=[5.04442073643383265887e-1, 1.97102833525523411709e-1, 1.87648584092575249293e-2,
        6.84079380915393090172e-4, 1.15138826111884280931e-5, 9.82852443688422223854e-8,
        4.45344415861750144738e-10, 1.08268041139020870318e-12, 1.37555460633261799868e-15,
        8.36354435630677421531e-19, 1.86958710162783235106e-22],
    gd=[1.0, 1.47495759925128324529e0, 3.37748989120019970451e-1, 2.53603741420338795122e-2,
        8.14679107184306179049e-4, 1.27545075667729118702e-5, 1.04314589657571990585e-7,
        4.60680728146520428211e-10, 1.10273215066240270757e-12, 1.38796531259578871258e-15,
        8.39158816283118707363e-19, 1.86958710162783236342e-22])


def _sin_cos_half_pi_square(x):
    """sin and cos of pi x^2 / 2, reducing x^2 / 2 modulo 2 exactly first (Cephes' sinpi/cospi):
    with s = x mod 2, x^2 / 2 = s (x - s / 2) modulo 2."""
    x = jnp.abs(x)
    s = jnp.fmod(x, 2.0)
    r = jnp.fmod(s * (x - s / 2), 2.0)
    sin = jnp.where(r < 0.5, jnp.sin(np.pi * r),
                    jnp.where(r > 1.5, jnp.sin(np.pi * (r - 2.0)), -jnp.sin(np.pi * (r - 1.0))))
    cos = jnp.where(r == 0.5, 0.0,
                    jnp.where(r < 1.0, -jnp.sin(np.pi * (r - 0.5)), jnp.sin(np.pi * (r - 1.5))))
    return sin, cos


def _fresnel_float(xa):
    single = xa.dtype == np.float32
    c = _FRESNEL32 if single else _FRESNEL64
    x = jnp.abs(xa)
    x2 = x * x
    t = x2 * x2
    if single:
        s_small, c_small = x * x2 * _poly(c["sn"], t), x * _poly(c["cn"], t)
    else:
        s_small = x * x2 * _poly(c["sn"], t) / _poly(c["sd"], t)
        c_small = x * _poly(c["cn"], t) / _poly(c["cd"], t)
    sin, cos = _sin_cos_half_pi_square(x)
    if single:
        s_large = c_large = 0.5
    else:
        c_large = 0.5 + 1 / (np.pi * x) * sin
        s_large = 0.5 - 1 / (np.pi * x) * cos
    # The auxiliary functions f and g of the asymptotic range, in u = 1 / (pi x^2)^2.
    pix2 = np.pi * x2
    u = 1.0 / (pix2 * pix2)
    if single:
        f = 1.0 - u * _poly(c["fn"], u)
        g = (1.0 / pix2) * _poly(c["gn"], u)
    else:
        f = 1.0 - u * _poly(c["fn"], u) / _poly(c["fd"], u)
        g = (1.0 / pix2) * _poly(c["gn"], u) / _poly(c["gd"], u)
    pix = np.pi * x
    c_mid = 0.5 + (f * sin - g * cos) / pix
    s_mid = 0.5 - (f * cos + g * sin) / pix
    small, large, inf = x2 < 2.5625, x > 36974.0, jnp.isinf(xa)
    s = jnp.where(inf, 0.5, jnp.where(small, s_small, jnp.where(large, s_large, s_mid)))
    cc = jnp.where(inf, 0.5, jnp.where(small, c_small, jnp.where(large, c_large, c_mid)))
    neg = xa < 0.0
    return jnp.where(neg, -s, s), jnp.where(neg, -cc, cc)


@custom_jvp
def fresnel(x):
    """The Fresnel integrals (S(x), C(x)) of sin and cos of pi t^2 / 2 from 0 to x."""
    x, = _float(x)
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        raise NotImplementedError("Support for complex-valued inputs is not implemented yet.")
    if x.dtype not in (np.float16, np.float32, np.float64, jnp.bfloat16):
        raise NotImplementedError(f"Support for {x.dtype} dtype is not implemented yet.")
    return _in_float32_or_wider(_fresnel_float, x)


@fresnel.defjvp
def _fresnel_jvp(primals, tangents):
    x, = primals
    sin, cos = _sin_cos_half_pi_square(x)
    return fresnel(x), (sin * tangents[0], cos * tangents[0])


# --- sine and cosine integrals (Cephes sici.c) ------------------------------------------------

_SICI_SN = [-8.39167827910303881427e-11, 4.62591714427012837309e-8, -9.75759303843632795789e-6,
            9.76945438170435310816e-4, -4.13470316229406538752e-2, 1.00000000000000000302e0]
_SICI_SD = [2.03269266195951942049e-12, 1.27997891179943299903e-9, 4.41827842801218905784e-7,
            9.96412122043875552487e-5, 1.42085239326149893930e-2, 9.99999999999999996984e-1]
_SICI_CN = [2.02524002389102268789e-11, -1.35249504915790756375e-8, 3.59325051419993077021e-6,
            -4.74007206873407909465e-4, 2.89159652607555242092e-2, -1.00000000000000000080e0]
_SICI_CD = [4.07746040061880559506e-12, 3.06780997581887812692e-9, 1.23210355685883423679e-6,
            3.17442024775032769882e-4, 5.10028056236446052392e-2, 4.00000000000000000080e0]
# The auxiliary functions f, g for 4 < x < 8 and x >= 8, in z = 1 / x^2.
_SICI_FN4 = [4.23612862892216586994e0, 5.45937717161812843388e0, 1.62083287701538329132e0,
             1.67006611831323023771e-1, 6.81020132472518137426e-3, 1.08936580650328664411e-4,
             5.48900223421373614008e-7]
_SICI_FD4 = [1.0, 8.16496634205391016773e0, 7.30828822505564552187e0, 1.86792257950184183883e0,
             1.78792052963149907262e-1, 7.01710668322789753610e-3, 1.10034357153915731354e-4,
             5.48900252756255700982e-7]
_SICI_GN4 = [8.71001698973114191777e-2, 6.11379109952219284151e-1, 3.97180296392337498885e-1,
             7.48527737628469092119e-2, 5.38868681462177273157e-3, 1.61999794598934024525e-4,
             1.97963874140963632189e-6, 7.82579040744090311069e-9]
_SICI_GD4 = [1.0, 1.64402202413355338886e0, 6.66296701268987968381e-1, 9.88771761277688796203e-2,
             6.22396345441768420760e-3, 1.73221081474177119497e-4, 2.02659182086343991969e-6,
             7.82579218933534490868e-9]
_SICI_FN8 = [4.55880873470465315206e-1, 7.13715274100146711374e-1, 1.60300158222319456320e-1,
             1.16064229408124407915e-2, 3.49556442447859055605e-4, 4.86215430826454749482e-6,
             3.20092790091004902806e-8, 9.41779576128512936592e-11, 9.70507110881952024631e-14]
_SICI_FD8 = [1.0, 9.17463611873684053703e-1, 1.78685545332074536321e-1, 1.22253594771971293032e-2,
             3.58696481881851580297e-4, 4.92435064317881464393e-6, 3.21956939101046018377e-8,
             9.43720590350276732376e-11, 9.70507110881952025725e-14]
_SICI_GN8 = [6.97359953443276214934e-1, 3.30410979305632063225e-1, 3.84878767649974295920e-2,
             1.71718239052347903558e-3, 3.48941165502279436777e-5, 3.47131167084116673800e-7,
             1.70404452782044526189e-9, 3.85945925430276600453e-12, 3.14040098946363334640e-15]
_SICI_GD8 = [1.0, 1.68548898811011640017e0, 4.87852258695304967486e-1, 4.67913194259625806320e-2,
             1.90284426674399523638e-3, 3.68475504442561108162e-5, 3.57043223443740838771e-7,
             1.72693748966316146736e-9, 3.87830166023954706752e-12, 3.14040098946363335242e-15]


def _sici_nonnegative(x):
    t = x * x
    si_near = jnp.where(x == 0, 0.0, x * _poly(_SICI_SN, t) / _poly(_SICI_SD, t))
    ci_near = jnp.where(x == 0, -np.inf,
                        np.euler_gamma + jnp.log(x) + t * _poly(_SICI_CN, t) / _poly(_SICI_CD, t))
    sin, cos = jnp.sin(x), jnp.cos(x)
    z = 1.0 / t
    below_8 = x < 8.0
    f = jnp.where(below_8, _poly(_SICI_FN4, z) / (x * _poly(_SICI_FD4, z)),
                  _poly(_SICI_FN8, z) / (x * _poly(_SICI_FD8, z)))
    g = jnp.where(below_8, z * _poly(_SICI_GN4, z) / _poly(_SICI_GD4, z),
                  z * _poly(_SICI_GN8, z) / _poly(_SICI_GD8, z))
    si_mid, ci_mid = np.pi / 2 - f * cos - g * sin, f * sin - g * cos
    inf = jnp.isposinf(x)
    si_far = jnp.where(inf, np.pi / 2, np.pi / 2 - cos / x)
    ci_far = jnp.where(inf, 0.0, sin / x)
    near, mid = x <= 4, (x > 4) & (x <= 1e9)
    return (jnp.select([near, mid], [si_near, si_mid], si_far),
            jnp.select([near, mid], [ci_near, ci_mid], ci_far))


@custom_jvp
def sici(x):
    """The sine and cosine integrals (Si(x), Ci(x)); Ci is nan at -inf (complex below 0)."""
    x, = _float(x)
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        raise ValueError(f"Argument `x` to sici must be real-valued. Got dtype {x.dtype}.")
    si, ci = _sici_nonnegative(jnp.abs(x))
    return jnp.sign(x) * si, jnp.where(jnp.isneginf(x), np.nan, ci)


@sici.defjvp
def _sici_jvp(primals, tangents):
    x, = primals
    t, = tangents
    return sici(x), (jnp.sinc(x / np.pi) * t, jnp.cos(x) / x * t)


# --- Spence's function (Cephes spence.c) ------------------------------------------------------

_SPENCE_A = [4.65128586073990045278e-5, 7.31589045238094711071e-3, 1.33847639578309018650e-1,
             8.79691311754530315341e-1, 2.71149851196553469920e0, 4.25697156008121755724e0,
             3.29771340985225106936e0, 1.00000000000000000126e0]
_SPENCE_B = [6.90990488912553276999e-4, 2.54043763932544379113e-2, 2.82974860602568089943e-1,
             1.41172597751831069617e0, 3.63800533345137075418e0, 5.03278880143316990390e0,
             3.54771340985225096217e0, 9.99999999999999998740e-1]


def _spence_positive(x):
    """spence for x > 0 (x != 1): the rational approximation in w near 1, reached through the
    reflections x -> 1/x (x > 2 or > 1.5) and x -> 1 - x (x < 0.5)."""
    above_2 = x > 2.0
    x = jnp.where(above_2, 1.0 / x, x)
    above_1_5, below_0_5 = x > 1.5, x < 0.5
    inverted = above_2 | above_1_5
    w = jnp.where(above_1_5, 1.0 / x - 1.0, jnp.where(below_0_5, -x, x - 1.0))
    y = -w * _poly(_SPENCE_A, w) / _poly(_SPENCE_B, w)
    y = jnp.where(below_0_5, np.pi ** 2 / 6.0 - jnp.log(x) * jnp.log(1.0 - x) - y, y)
    return jnp.where(inverted, -0.5 * jnp.log(x) ** 2 - y, y)


def spence(x):
    """Spence's function: the integral from 1 to x of log(t) / (1 - t); nan for x < 0."""
    x = jnp.asarray(x)
    if x.dtype not in (np.float32, np.float64):
        raise TypeError(f"x.dtype={x.dtype} is not supported, see docstring for supported types.")
    return jnp.piecewise(x, [x < 0.0, x == 1.0, x == 0.0], [np.nan, 0, np.pi ** 2 / 6, _spence_positive])


# --- Faddeeva function (Weideman 1994) --------------------------------------------------------

def _weideman_coefficients(n: int):
    """The coefficients (highest power first) of Weideman's expansion with n terms, and its L."""
    m = 2 * n
    k = np.arange(-m + 1, m)
    scale = math.sqrt(n / math.sqrt(2))
    t = scale * np.tan(k * np.pi / m / 2)
    f = np.concatenate([[0.0], np.exp(-t * t) * (scale * scale + t * t)])
    a = np.real(np.fft.fft(np.fft.fftshift(f))) / (2 * m)
    return a[1:n + 1][::-1].copy(), scale


_WOFZ_COEFS, _WOFZ_L = _weideman_coefficients(32)


def _wofz_upper(z):
    """w(z) for Im z >= 0: sum of a_k Z^k with Z = (L + iz) / (L - iz)."""
    real_dtype = jnp.real(z).dtype
    iz = lax.complex(-jnp.imag(z), jnp.real(z))
    scale = lax.complex(jnp.full_like(jnp.real(z), _WOFZ_L), jnp.zeros_like(jnp.real(z)))
    denom = scale - iz
    big_z = (scale + iz) / denom
    p = jnp.polyval(jnp.asarray(_WOFZ_COEFS.astype(real_dtype)).astype(z.dtype), big_z)
    return 2 * p / (denom * denom) + (1.0 / math.sqrt(math.pi)) / denom


@custom_jvp
def _wofz(z):
    upper = jnp.imag(z) >= 0
    w = _wofz_upper(jnp.where(upper, z, -z))
    return jnp.where(upper, w, 2 * jnp.exp(-z * z) - w)


@_wofz.defjvp
def _wofz_jvp(primals, tangents):
    z, = primals
    w = _wofz(z)
    return w, tangents[0] * (-2 * z * w + 2j / math.sqrt(math.pi))


def wofz(z):
    """The Faddeeva function w(z) = exp(-z^2) erfc(-iz), complex for every input."""
    z = jnp.asarray(z)
    if not jnp.issubdtype(z.dtype, jnp.complexfloating):
        z, = _float(z)
        z = z.astype(jnp.result_type(z.dtype, np.complex64))
    return _wofz(z)


# --- Owen's T function (Patefield & Tandy method T5) ------------------------------------------

def _owens_t_rule():
    nodes, weights = np.polynomial.legendre.leggauss(26)
    positive = nodes > 0
    order = np.argsort(nodes[positive])
    return nodes[positive][order] ** 2, weights[positive][order] / (2 * np.pi)


_OWENS_T_NODES, _OWENS_T_WEIGHTS = _owens_t_rule()


def _owens_t_quadrature(h, a):
    """T(h, a) for |a| <= 1: a * sum_i w_i exp(-h^2 (1 + a^2 t_i) / 2) / (1 + a^2 t_i).
    The rule's float64 tables promote float32 arguments to float64 when x64 is on, as in JAX."""
    r = jnp.square(a)[..., None] * jnp.asarray(_OWENS_T_NODES)
    integrand = jnp.exp(-0.5 * jnp.square(h)[..., None] * (1.0 + r)) / (1.0 + r)
    return a * (integrand @ jnp.asarray(_OWENS_T_WEIGHTS))


@custom_jvp
def _owens_t(h, a):
    h, abs_a = jnp.abs(h), jnp.abs(a)
    root_2 = math.sqrt(2)
    inner_a = jnp.where(abs_a <= 1.0, abs_a, 1.0 / abs_a)
    inner_h = jnp.where(abs_a <= 1.0, h, abs_a * h)
    out = _owens_t_quadrature(inner_h, inner_a)
    out = jnp.where(inner_h == 0.0, jnp.arctan(inner_a) / (2 * np.pi), out)
    out = jnp.where(inner_a == 1.0,
                    0.125 * lax.erfc(-inner_h / root_2) * lax.erfc(inner_h / root_2), out)
    # |a| > 1: T(h, a) = (Phi(h) + Phi(ah)) / 2 - Phi(h) Phi(ah) - T(ah, 1/a) (for h >= 0).
    h_n = h / root_2
    q_h, q_ah = lax.erfc(h_n), lax.erfc(abs_a * h_n)
    reflected = jnp.where(abs_a * h <= 0.67,
                          0.25 - 0.25 * lax.erf(h_n) * lax.erf(abs_a * h_n) - out,
                          0.25 * (q_h + q_ah - q_h * q_ah) - out)
    out = jnp.sign(a) * jnp.where(abs_a > 1.0, reflected, out)
    return jnp.where(jnp.isnan(a) | jnp.isnan(h), np.nan, out)


@_owens_t.defjvp
def _owens_t_jvp(primals, tangents):
    h, a = primals
    dh, da = tangents
    d_by_h = -jnp.exp(-0.5 * h * h) * lax.erf(a * h / math.sqrt(2)) / (2.0 * math.sqrt(2 * np.pi))
    d_by_a = jnp.exp(-0.5 * (a * a + 1.0) * h * h) / (2 * np.pi * (a * a + 1.0))
    out = _owens_t(h, a)
    return out, (d_by_h * dh + d_by_a * da).astype(out.dtype)


def owens_t(h, a):
    """Owen's T function: the probability that X > h and 0 < Y < aX for independent normals."""
    h, a = _float(h, a)
    h, a = jnp.broadcast_arrays(h, a)
    return _owens_t(h, a)
