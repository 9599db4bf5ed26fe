// Mip-debug colouring, shared by the forward shader (#include'd by the renderer).
// "Wanted" is the level the hardware would pick here (UV derivatives x chain size, like
// textureQueryLod but in chain levels, so it does not depend on which levels are stored);
// "resident" is the finest chain level the provider holds. Green: the wanted level is there;
// yellow: one level coarser is all we have; red: two or more levels missing.
float wanted_level(vec2 uv, vec2 chain_size) {
    vec2 dx = dFdx(uv * chain_size);
    vec2 dy = dFdy(uv * chain_size);
    float rho2 = max(dot(dx, dx), dot(dy, dy));
    return max(0.5 * log2(max(rho2, 1e-12)), 0.0);
}

vec3 mip_debug_color(float wanted, float resident, vec3 albedo) {
    float missing = resident - floor(wanted);
    vec3 c = missing <= 0.0 ? vec3(0.1, 0.85, 0.2)
           : missing <= 1.0 ? vec3(0.95, 0.85, 0.1)
           : vec3(0.95, 0.15, 0.1);
    float luma = dot(albedo, vec3(0.2126, 0.7152, 0.0722));
    return c * (0.45 + 0.55 * clamp(luma * 2.0, 0.0, 1.0));
}
