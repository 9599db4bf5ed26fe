// Metal-roughness GGX, shared by the per-object and the batched forward passes.
const float PI = 3.14159265;

float d_ggx(float ndh, float a) {
    float a2 = a * a;
    float d = ndh * ndh * (a2 - 1.0) + 1.0;
    return a2 / (PI * d * d);
}

float v_smith(float ndv, float ndl, float a) {
    float k = a * 0.5;
    return 0.25 / ((ndv * (1.0 - k) + k) * (ndl * (1.0 - k) + k));
}

vec3 brdf(vec3 n, vec3 v, vec3 l, vec3 base, float rough, float metal) {
    vec3 h = normalize(v + l);
    float ndl = max(dot(n, l), 0.0);
    float ndv = max(dot(n, v), 1e-4);
    // Dots of unit vectors can round past 1 (v == l, a light seen along the view ray), and
    // pow(1.0 - vdh, 5.0) of a negative base is NaN: black pixels. Clamp to [0, 1].
    float ndh = clamp(dot(n, h), 0.0, 1.0);
    float vdh = clamp(dot(v, h), 0.0, 1.0);
    float a = max(rough * rough, 0.002);
    vec3 f0 = mix(vec3(0.04), base, metal);
    vec3 f = f0 + (1.0 - f0) * pow(1.0 - vdh, 5.0);
    vec3 spec = f * d_ggx(ndh, a) * v_smith(ndv, ndl, a);
    vec3 diff = (1.0 - f) * (1.0 - metal) * base / PI;
    return (diff + spec) * ndl;
}
